//===- MoeCases.cpp - a mixture of experts' routing -----------------------===//

#include "test/conformance/CaseBuilder.h"

using namespace twill;
using namespace twill::conformance;

void conformance::routeCases(Suite &suite) {
  // Tokens in two dims and in one; odd expert counts; k of 1 to 8.
  for (DType type : kFloats)
    for (bool normalize : {false, true})
      for (auto [logits, k] :
           {std::pair{Shape{3, 37, 61}, 8}, std::pair{Shape{129, 8}, 2},
            std::pair{Shape{5, 3}, 1}}) {
        Shape chosen = logits;
        chosen.back() = k;
        CaseBuilder route(suite, ROUTE, type, kSummed);
        route.in(logits);
        route.out(chosen);
        route.result(I32, chosen);
        route->mutable_route()->set_normalize(normalize);
        route.add();

        // The experts the route before it chose; its weights stand for
        // dL/dweights.
        CaseBuilder grad(suite, ROUTE_GRAD, type, kSummed);
        Instruction first;
        first.set_opcode(ROUTE);
        first.mutable_route()->set_normalize(normalize);
        first.add_operands(grad.in(logits));
        int indices = grad.computed(I32, chosen);
        first.add_results(grad.computed(type, chosen));
        first.add_results(indices);
        grad.out(logits);
        grad->mutable_route()->set_normalize(normalize);
        grad.before(first).note("the experts route chose").add();
      }
}
