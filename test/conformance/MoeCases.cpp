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

/// The results of expert_positions a case reads.
enum class Reads { Positions, Counts };

/// expert_positions of random experts, run before a case that reads its
/// positions or its counts as its next operand.
Instruction sortBefore(CaseBuilder &c, const SlotsCase &size, Reads reads) {
  Instruction sort;
  sort.set_opcode(EXPERT_POSITIONS);
  sort.add_operands(c.filled(I32, size.slots(), integers(0, size.experts)));
  auto value = [&](bool read, Shape shape) {
    return read ? c.computed(I32, shape) : c.scratch(I32, shape);
  };
  sort.add_results(value(reads == Reads::Positions, size.slots()));
  sort.add_results(value(reads == Reads::Counts, {size.groups, size.experts}));
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
        Instruction sort = sortBefore(dispatch, size, Reads::Positions);
        if (weighted)
          dispatch.in(size.slots());
        dispatch.out(size.rows());
        dispatch.before(sort).note("expert_positions of random experts").add();

        CaseBuilder combine(suite, COMBINE, type, tolerance);
        combine.in(size.rows());
        sort = sortBefore(combine, size, Reads::Positions);
        if (weighted)
          combine.in(size.slots());
        combine.out(size.tokenValues());
        combine.before(sort).note("expert_positions of random experts").add();
      }
  for (DType type : kFloats)
    for (const SlotsCase &size : kSlotsCases) {
      CaseBuilder grad(suite, COMBINE_WEIGHTS_GRAD, type, kSummed);
      grad.in(size.rows());
      Instruction sort = sortBefore(grad, size, Reads::Positions);
      grad.in(size.tokenValues());
      grad.out(size.slots());
      grad.before(sort).note("expert_positions of random experts").add();
    }
}

void conformance::groupedMatmulCases(Suite &suite) {
  // Each expert's rows of random experts times its weight, both layouts;
  // n and k odd, experts without rows.
  const int64_t k = 37, n = 29;
  for (DType type : kFloats)
    for (const SlotsCase &size : kSlotsCases)
      for (bool transposed : {false, true}) {
        Shape weight =
            transposed ? Shape{size.experts, n, k} : Shape{size.experts, k, n};
        CaseBuilder product(suite, GROUPED_MATMUL, type, kSummed);
        product.in({size.groups, size.tokens * size.k, k});
        product.in(weight);
        Instruction sort = sortBefore(product, size, Reads::Counts);
        product.out({size.groups, size.tokens * size.k, n});
        product->mutable_grouped_matmul()->set_transpose_rhs(transposed);
        product.before(sort).note("expert_positions' counts").add();

        CaseBuilder grad(suite, GROUPED_MATMUL_WEIGHT_GRAD, type, kSummed);
        grad.in({size.groups, size.tokens * size.k, k});
        grad.in({size.groups, size.tokens * size.k, n});
        sort = sortBefore(grad, size, Reads::Counts);
        grad.out(weight);
        grad->mutable_grouped_matmul()->set_transpose_rhs(transposed);
        grad.before(sort).note("expert_positions' counts").add();
      }
}

void conformance::loadBalancingCases(Suite &suite) {
  // A router's load over the tokens a mask keeps (about half), random
  // choices (a repeat within a token counts once); tokens in two dims and
  // in one, odd expert counts.
  for (DType type : kFloats)
    for (auto [logits, k] :
         {std::pair{Shape{3, 37, 61}, 8}, std::pair{Shape{129, 8}, 2},
          std::pair{Shape{5, 3}, 1}}) {
      Shape tokens(logits.begin(), logits.end() - 1), chosen = logits;
      chosen.back() = k;
      Shape experts = {logits.back()};
      CaseBuilder load(suite, EXPERT_LOAD, type, kSummed);
      load.in(logits);
      load.operand(I32, chosen, integers(0, logits.back()));
      load.operand(I32, tokens, integers(0, 2));
      load.result(F32, experts);
      load.result(F32, experts);
      load.result(F32, {});
      load.add();

      CaseBuilder grad(suite, EXPERT_LOAD_GRAD, type, kSummed);
      grad.in(logits);
      grad.operand(I32, tokens, integers(0, 2));
      grad.operand(F32, experts);
      grad.out(logits);
      grad.add();
    }
  // The loss of sums over 50 tokens, and of none (0).
  for (double tokens : {50.0, 0.0}) {
    CaseBuilder loss(suite, LOAD_BALANCING_LOSS, F32, kSummed);
    loss.in({61}, uniform(0, 10));
    loss.in({61}, integers(0, 50));
    loss.in({}, value(tokens));
    loss.out({});
    loss.add();

    CaseBuilder grad(suite, LOAD_BALANCING_LOSS_GRAD, F32, kSummed);
    grad.in({61}, integers(0, 50));
    grad.in({}, value(tokens));
    grad.in({});
    grad.out({61});
    grad.add();
  }
}
