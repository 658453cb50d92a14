//===- RoutingTest.cpp - route and route_grad against naive loops ---------===//
//
// support/Routing.h (the kernel both backends run a token at a time)
// against a full sort of the softmax and against finite differences of
// the weights it gives; the route shape rules; and the cpu runners over
// an instruction's buffers, refusing what they must.
//
//===----------------------------------------------------------------------===//

#include "support/Routing.h"
#include "opmodel/Shapes.h"
#include "runtime/backend/cpu/CpuOps.h"
#include "test/unit/HostInstruction.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace twill;
using twill::test::HostInstruction;
using twill::test::problemOf;
using twill::test::randomValues;

namespace {

/// The reference choice: the softmax in double, every expert sorted by it
/// (stable: a tie keeps the lower expert first), the first k, normalized.
void naiveRoute(const std::vector<float> &logits, int64_t k, bool normalize,
                std::vector<double> &weights, std::vector<int32_t> &indices) {
  int64_t experts = logits.size();
  double max = *std::max_element(logits.begin(), logits.end()), sum = 0;
  std::vector<double> p(experts);
  for (int64_t e = 0; e < experts; ++e)
    sum += p[e] = std::exp(double(logits[e]) - max);
  for (double &value : p)
    value /= sum;
  std::vector<int32_t> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  indices.assign(order.begin(), order.begin() + k);
  weights.clear();
  for (int32_t e : indices)
    weights.push_back(p[e]);
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (normalize)
    for (double &w : weights)
      w /= total;
}

TEST(Routing, ChoosesTheTopKOfTheSoftmaxAsASortDoes) {
  for (bool normalize : {false, true})
    for (int64_t k : {1, 2, 5, 8}) {
      std::vector<float> logits = randomValues(8, 10 + k);
      std::vector<float> weights(k);
      std::vector<int32_t> indices(k);
      routing::route(logits.data(), 8, k, normalize, weights.data(),
                     indices.data());
      std::vector<double> expected;
      std::vector<int32_t> expectedIndices;
      naiveRoute(logits, k, normalize, expected, expectedIndices);
      EXPECT_EQ(indices, expectedIndices) << "k " << k;
      for (int64_t j = 0; j < k; ++j)
        EXPECT_NEAR(weights[j], expected[j], 1e-6) << "k " << k;
    }
}

TEST(Routing, TiesGoToTheLowerExpert) {
  // Experts 1, 3 and 4 tie for first; all eight tie in the second token.
  const float tied[] = {0.5f, 2.f, -1.f, 2.f, 2.f, 0.5f, 0.f, 1.f};
  float weights[4];
  int32_t indices[4];
  routing::route(tied, 8, 4, /*normalize=*/true, weights, indices);
  EXPECT_EQ(std::vector<int32_t>(indices, indices + 4),
            (std::vector<int32_t>{1, 3, 4, 7}));
  const float flat[8] = {};
  routing::route(flat, 8, 3, /*normalize=*/true, weights, indices);
  EXPECT_EQ(std::vector<int32_t>(indices, indices + 3),
            (std::vector<int32_t>{0, 1, 2}));
  for (int j = 0; j < 3; ++j)
    EXPECT_FLOAT_EQ(weights[j], 1.f / 3);
}

TEST(Routing, GradientIsTheWeightsFiniteDifference) {
  // L = sum_j g_j w_j(logits), the experts held as chosen.
  const int64_t experts = 6, k = 3;
  std::vector<float> logits = randomValues(experts, 3);
  std::vector<float> grad = randomValues(k, 4);
  for (bool normalize : {false, true}) {
    std::vector<float> weights(k);
    std::vector<int32_t> indices(k);
    routing::route(logits.data(), experts, k, normalize, weights.data(),
                   indices.data());
    std::vector<float> result(experts);
    routing::routeGrad(logits.data(), experts, indices.data(), grad.data(), k,
                       normalize, result.data());
    auto loss = [&](const std::vector<float> &at) {
      double max = *std::max_element(at.begin(), at.end()), sum = 0;
      for (float logit : at)
        sum += std::exp(logit - max);
      double total = 0, l = 0;
      for (int64_t j = 0; j < k; ++j)
        total += std::exp(at[indices[j]] - max) / sum;
      for (int64_t j = 0; j < k; ++j)
        l += grad[j] * std::exp(at[indices[j]] - max) / sum /
             (normalize ? total : 1.0);
      return l;
    };
    const float step = 1e-2f;
    for (int64_t e = 0; e < experts; ++e) {
      std::vector<float> up = logits, down = logits;
      up[e] += step;
      down[e] -= step;
      EXPECT_NEAR(result[e], (loss(up) - loss(down)) / (2 * step), 2e-4)
          << "expert " << e << (normalize ? " normalized" : "");
    }
  }
}

TEST(Routing, ShapeRules) {
  EXPECT_EQ(problemOf(shapes::route({2, 5, 8}, {2, 5, 2}, {2, 5, 2})), "");
  EXPECT_EQ(problemOf(shapes::route({4, 8}, {4, 9}, {4, 9})),
            "weights must choose 1 to 8 experts (the logits' last dim) a "
            "token, got [4, 9]");
  EXPECT_EQ(problemOf(shapes::route({4, 8}, {3, 2}, {3, 2})),
            "weights must have shape [4, 2], got [3, 2]");
  EXPECT_EQ(problemOf(shapes::route({4, 8}, {4, 2}, {4, 3})),
            "indices must have shape [4, 2], got [4, 3]");
  EXPECT_EQ(problemOf(shapes::routeGrad({4, 8}, {4, 2}, {4, 2}, {4, 8})), "");
  EXPECT_EQ(problemOf(shapes::routeGrad({4, 8}, {4, 2}, {4, 2}, {4, 2})),
            "result must have shape [4, 8], got [4, 2]");
  EXPECT_EQ(problemOf(shapes::routeGrad({4, 8}, {4, 0}, {4, 0}, {4, 8})),
            "indices must choose 1 to 8 experts (the logits' last dim) a "
            "token, got [4, 0]");
}

TEST(Routing, CpuRunnersRouteEveryTokenAndRefuseBadIndices) {
  const int64_t tokens = 5, experts = 7, k = 2;
  std::vector<float> logits = randomValues(tokens * experts, 8);
  std::vector<float> weights(tokens * k), grad = randomValues(tokens * k, 9);
  std::vector<int32_t> indices(tokens * k);
  HostInstruction route(ROUTE);
  route.operand(F32, {tokens, experts}, logits);
  route.result(F32, {tokens, k}, weights);
  route.result(I32, {tokens, k}, indices);
  route->mutable_route()->set_normalize(true);
  ASSERT_EQ(problemOf(cpu::runRoute(route.view())), "");
  for (int64_t t = 0; t < tokens; ++t) {
    float one[k];
    int32_t oneIndices[k];
    routing::route(logits.data() + t * experts, experts, k, true, one,
                   oneIndices);
    for (int64_t j = 0; j < k; ++j) {
      EXPECT_EQ(indices[t * k + j], oneIndices[j]);
      EXPECT_EQ(weights[t * k + j], one[j]);
    }
  }

  std::vector<float> result(tokens * experts);
  HostInstruction backward(ROUTE_GRAD);
  backward.operand(F32, {tokens, experts}, logits);
  backward.operand(I32, {tokens, k}, indices);
  backward.operand(F32, {tokens, k}, grad);
  backward.result(F32, {tokens, experts}, result);
  backward->mutable_route()->set_normalize(true);
  ASSERT_EQ(problemOf(cpu::runRouteGrad(backward.view())), "");
  std::vector<float> expected(experts);
  routing::routeGrad(logits.data() + 3 * experts, experts,
                     indices.data() + 3 * k, grad.data() + 3 * k, k, true,
                     expected.data());
  for (int64_t e = 0; e < experts; ++e)
    EXPECT_EQ(result[3 * experts + e], expected[e]);

  indices[3] = experts;
  EXPECT_EQ(problemOf(cpu::runRouteGrad(backward.view())),
            "route_grad: index 3 names expert 7 of 7");
  HostInstruction tooMany(ROUTE);
  std::vector<float> wide(tokens * 8);
  std::vector<int32_t> wideIndices(tokens * 8);
  tooMany.operand(F32, {tokens, experts}, logits);
  tooMany.result(F32, {tokens, 8}, wide);
  tooMany.result(I32, {tokens, 8}, wideIndices);
  tooMany->mutable_route();
  EXPECT_EQ(problemOf(cpu::runRoute(tooMany.view())),
            "route: weights must choose 1 to 7 experts (the logits' last "
            "dim) a token, got [5, 8]");
}

} // namespace
