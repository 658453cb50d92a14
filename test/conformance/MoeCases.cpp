//===- MoeCases.cpp - a mixture of experts' routing and dispatch ----------===//

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

namespace {
/// Groups, tokens a group, k, experts, width: experts that get no token
/// (61 of them for 3 x 37 x 8 slots), one expert, k of 1, odd widths.
struct SlotsCase {
  int64_t groups, tokens, k, experts, width;
  Shape slots() const { return {groups, tokens, k}; }
  Shape tokenValues() const { return {groups, tokens, width}; }
  Shape rows() const { return {groups, tokens * k, width}; }
};
constexpr SlotsCase kSlotsCases[] = {
    {3, 37, 8, 61, 33}, {2, 129, 2, 8, 64}, {1, 5, 1, 1, 7}};

/// expert_positions of random experts, run before a case that reads its
/// positions as its operand 1.
Instruction positionsOf(CaseBuilder &c, const SlotsCase &size) {
  Instruction sort;
  sort.set_opcode(EXPERT_POSITIONS);
  sort.add_operands(c.filled(I32, size.slots(), integers(0, size.experts)));
  sort.add_results(c.computed(I32, size.slots()));
  sort.add_results(c.scratch(I32, {size.groups, size.experts}));
  return sort;
}
} // namespace

void conformance::dispatchCases(Suite &suite) {
  for (const SlotsCase &size : kSlotsCases) {
    CaseBuilder sort(suite, EXPERT_POSITIONS, I32, kExact);
    sort.operand(I32, size.slots(), integers(0, size.experts));
    sort.result(I32, size.slots());
    sort.result(I32, {size.groups, size.experts});
    sort.add();
  }
  for (DType type : kFloats)
    for (const SlotsCase &size : kSlotsCases)
      for (bool weighted : {false, true}) {
        // dispatch and combine move values (times a weight): exact
        // unweighted, a rounding apart weighted or summed.
        double tolerance = weighted || size.k > 1 ? kSummed : kExact;
        CaseBuilder dispatch(suite, DISPATCH, type,
                             weighted ? kSummed : kExact);
        dispatch.in(size.tokenValues());
        Instruction sort = positionsOf(dispatch, size);
        if (weighted)
          dispatch.in(size.slots());
        dispatch.out(size.rows());
        dispatch.before(sort).note("expert_positions of random experts").add();

        CaseBuilder combine(suite, COMBINE, type, tolerance);
        combine.in(size.rows());
        sort = positionsOf(combine, size);
        if (weighted)
          combine.in(size.slots());
        combine.out(size.tokenValues());
        combine.before(sort).note("expert_positions of random experts").add();
      }
  for (DType type : kFloats)
    for (const SlotsCase &size : kSlotsCases) {
      CaseBuilder grad(suite, COMBINE_WEIGHTS_GRAD, type, kSummed);
      grad.in(size.rows());
      Instruction sort = positionsOf(grad, size);
      grad.in(size.tokenValues());
      grad.out(size.slots());
      grad.before(sort).note("expert_positions of random experts").add();
    }
}
