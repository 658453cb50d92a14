//===- LoadBalancingTest.cpp - the load-balancing loss's ops, naively -----===//
//
// expert_load, load_balancing_loss and their gradients (support/Routing.h,
// through the cpu runners) against naive loops in double: a softmax and
// count a token, the Switch Transformer's formula, and central differences
// of both; the shape rules; what the runners refuse.
//
//===----------------------------------------------------------------------===//

#include "opmodel/Shapes.h"
#include "runtime/backend/cpu/CpuOps.h"
#include "support/Routing.h"
#include "test/unit/HostInstruction.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace twill;
using twill::test::HostInstruction;
using twill::test::problemOf;
using twill::test::randomValues;

namespace {

constexpr int64_t kTokens = 9, kExperts = 5, kK = 2;

/// The sums of expert_load in double: each kept token's softmax, and the
/// tokens that name an expert among their k.
struct NaiveLoad {
  std::vector<double> probabilities, counts;
  double tokens = 0;
};
NaiveLoad naiveLoad(const std::vector<float> &logits,
                    const std::vector<int32_t> &indices,
                    const std::vector<int32_t> &mask) {
  NaiveLoad load{std::vector<double>(kExperts), std::vector<double>(kExperts)};
  for (int64_t t = 0; t < kTokens; ++t) {
    if (!mask[t])
      continue;
    load.tokens += 1;
    double sum = 0;
    for (int64_t e = 0; e < kExperts; ++e)
      sum += std::exp(double(logits[t * kExperts + e]));
    for (int64_t e = 0; e < kExperts; ++e) {
      load.probabilities[e] += std::exp(double(logits[t * kExperts + e])) / sum;
      bool chosen = false;
      for (int64_t j = 0; j < kK; ++j)
        chosen = chosen || indices[t * kK + j] == e;
      load.counts[e] += chosen;
    }
  }
  return load;
}

/// Every token's top-k of `logits`, as route chooses them.
std::vector<int32_t> chosenOf(const std::vector<float> &logits) {
  std::vector<int32_t> indices(kTokens * kK);
  std::vector<float> weights(kK);
  for (int64_t t = 0; t < kTokens; ++t)
    routing::route(logits.data() + t * kExperts, kExperts, kK, false,
                   weights.data(), indices.data() + t * kK);
  return indices;
}

const std::vector<int32_t> kMask = {1, 1, 0, 1, 1, 1, 0, 0, 1};

/// expert_load of `logits` through the cpu runner.
struct Load {
  std::vector<float> probabilities = std::vector<float>(kExperts),
                     counts = std::vector<float>(kExperts),
                     tokens = std::vector<float>(1);
};
std::string runLoad(std::vector<float> &logits, std::vector<int32_t> &indices,
                    std::vector<int32_t> &mask, Load &load) {
  HostInstruction instruction(EXPERT_LOAD);
  instruction.operand(F32, {3, 3, kExperts}, logits);
  instruction.operand(I32, {3, 3, kK}, indices);
  instruction.operand(I32, {3, 3}, mask);
  instruction.result(F32, {kExperts}, load.probabilities);
  instruction.result(F32, {kExperts}, load.counts);
  instruction.result(F32, {}, load.tokens);
  return problemOf(cpu::runExpertLoad(instruction.view()));
}

TEST(LoadBalancing, ExpertLoadSumsTheKeptTokensSoftmaxAndChoices) {
  std::vector<float> logits = randomValues(kTokens * kExperts, 21);
  std::vector<int32_t> indices = chosenOf(logits), mask = kMask;
  Load load;
  ASSERT_EQ(runLoad(logits, indices, mask, load), "");
  NaiveLoad expected = naiveLoad(logits, indices, mask);
  EXPECT_EQ(load.tokens[0], 6.0f);
  for (int64_t e = 0; e < kExperts; ++e) {
    EXPECT_NEAR(load.probabilities[e], expected.probabilities[e], 1e-6) << e;
    EXPECT_EQ(load.counts[e], float(expected.counts[e])) << e;
  }
  // Every token keeps k of the experts.
  EXPECT_EQ(std::accumulate(load.counts.begin(), load.counts.end(), 0.0f),
            6.0f * kK);

  indices[5] = kExperts;
  EXPECT_EQ(runLoad(logits, indices, mask, load),
            "expert_load: index 5 names expert 5 of 5");
}

TEST(LoadBalancing, ExpertLoadGradIsTheProbabilitiesFiniteDifference) {
  // L = sum_e g_e P_e(logits), over the kept tokens.
  std::vector<float> logits = randomValues(kTokens * kExperts, 22);
  std::vector<float> grad = randomValues(kExperts, 23);
  std::vector<int32_t> indices = chosenOf(logits), mask = kMask;
  std::vector<float> result(kTokens * kExperts, 7.0f);
  HostInstruction instruction(EXPERT_LOAD_GRAD);
  instruction.operand(F32, {kTokens, kExperts}, logits);
  instruction.operand(I32, {kTokens}, mask);
  instruction.operand(F32, {kExperts}, grad);
  instruction.result(F32, {kTokens, kExperts}, result);
  ASSERT_EQ(problemOf(cpu::runExpertLoadGrad(instruction.view())), "");
  auto loss = [&](const std::vector<float> &at) {
    NaiveLoad load = naiveLoad(at, indices, mask);
    double l = 0;
    for (int64_t e = 0; e < kExperts; ++e)
      l += grad[e] * load.probabilities[e];
    return l;
  };
  const float step = 1e-2f;
  for (int64_t i = 0; i < kTokens * kExperts; ++i) {
    std::vector<float> up = logits, down = logits;
    up[i] += step;
    down[i] -= step;
    EXPECT_NEAR(result[i], (loss(up) - loss(down)) / (2 * step), 2e-4) << i;
    if (!mask[i / kExperts]) {
      EXPECT_EQ(result[i], 0.0f) << i;
    }
  }
}

/// load_balancing_loss through the cpu runner.
float runLoss(std::vector<float> &probabilities, std::vector<float> &counts,
              float tokens) {
  std::vector<float> tokensValue = {tokens}, result(1);
  HostInstruction instruction(LOAD_BALANCING_LOSS);
  instruction.operand(F32, {kExperts}, probabilities);
  instruction.operand(F32, {kExperts}, counts);
  instruction.operand(F32, {}, tokensValue);
  instruction.result(F32, {}, result);
  EXPECT_EQ(problemOf(cpu::runLoadBalancingLoss(instruction.view())), "");
  return result[0];
}

/// Its gradient by the probabilities, of dL/dloss `grad`.
std::vector<float> runLossGrad(std::vector<float> &counts, float tokens,
                               float grad) {
  std::vector<float> tokensValue = {tokens}, gradValue = {grad},
                     result(kExperts);
  HostInstruction instruction(LOAD_BALANCING_LOSS_GRAD);
  instruction.operand(F32, {kExperts}, counts);
  instruction.operand(F32, {}, tokensValue);
  instruction.operand(F32, {}, gradValue);
  instruction.result(F32, {kExperts}, result);
  EXPECT_EQ(problemOf(cpu::runLoadBalancingLossGrad(instruction.view())), "");
  return result;
}

TEST(LoadBalancing, LossIsTheSwitchTransformersAndItsGradient) {
  // Two layers' sums over 6 tokens each: 12 rows, 2 choices a row.
  std::vector<float> probabilities = {3.5f, 2.0f, 1.25f, 4.0f, 1.25f};
  std::vector<float> counts = {7, 4, 3, 8, 2};
  const float tokens = 12;
  double expected = 0;
  for (int64_t e = 0; e < kExperts; ++e)
    expected += (counts[e] / 12.0) * (probabilities[e] / 12.0);
  expected *= kExperts;
  EXPECT_NEAR(runLoss(probabilities, counts, tokens), expected, 1e-6);
  EXPECT_EQ(runLoss(probabilities, counts, 0), 0.0f);

  std::vector<float> grad = runLossGrad(counts, tokens, 0.5f);
  const float step = 1e-2f;
  for (int64_t e = 0; e < kExperts; ++e) {
    std::vector<float> up = probabilities, down = probabilities;
    up[e] += step;
    down[e] -= step;
    double difference = (routing::loadBalancingLoss(up.data(), counts.data(),
                                                    tokens, kExperts) -
                         routing::loadBalancingLoss(down.data(), counts.data(),
                                                    tokens, kExperts)) /
                        (2 * step);
    EXPECT_NEAR(grad[e], 0.5 * difference, 1e-5) << e;
  }
  for (float value : runLossGrad(counts, 0, 0.5f))
    EXPECT_EQ(value, 0.0f);
}

TEST(LoadBalancing, ShapeRules) {
  EXPECT_EQ(
      problemOf(shapes::expertLoad({2, 5, 8}, {2, 5, 2}, {2, 5}, {8}, {8}, {})),
      "");
  EXPECT_EQ(
      problemOf(shapes::expertLoad({2, 5, 8}, {2, 5, 2}, {2, 4}, {8}, {8}, {})),
      "mask must have shape [2, 5], got [2, 4]");
  EXPECT_EQ(
      problemOf(shapes::expertLoad({2, 5, 8}, {2, 5, 2}, {2, 5}, {8}, {7}, {})),
      "counts must have shape [8], got [7]");
  EXPECT_EQ(problemOf(shapes::expertLoad({2, 5, 8}, {2, 5, 2}, {2, 5}, {8}, {8},
                                         {1})),
            "tokens must have shape [], got [1]");
  EXPECT_EQ(
      problemOf(shapes::expertLoadGrad({2, 5, 8}, {2, 5}, {8}, {2, 5, 8})), "");
  EXPECT_EQ(
      problemOf(shapes::expertLoadGrad({2, 5, 8}, {2, 5}, {5}, {2, 5, 8})),
      "grad must have shape [8], got [5]");
  EXPECT_EQ(problemOf(shapes::loadBalancingLoss({8}, {8}, {}, {})), "");
  EXPECT_EQ(problemOf(shapes::loadBalancingLoss({2, 8}, {2, 8}, {}, {})),
            "probabilities must have rank 1, got 2");
  EXPECT_EQ(problemOf(shapes::loadBalancingLossGrad({8}, {}, {}, {8})), "");
  EXPECT_EQ(problemOf(shapes::loadBalancingLossGrad({8}, {}, {1}, {8})),
            "grad must have shape [], got [1]");
}

} // namespace
