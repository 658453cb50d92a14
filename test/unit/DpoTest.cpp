//===- DpoTest.cpp - DPO's loss of a preference pair ----------------------===//
//
// support/Dpo.h against TRL's formulas written out naively here (each loss
// from its definition, sigmoid and log as they are), and its gradient
// against central differences of the loss.
//
//===----------------------------------------------------------------------===//

#include "support/Dpo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace twill;

namespace {

/// TRL's per-pair loss, from its definition.
double naiveLoss(dpo::Settings s, const dpo::Pair &p) {
  double chosen = p.policyChosen - p.referenceChosen;
  double rejected = p.policyRejected - p.referenceRejected;
  double delta = chosen - rejected;
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  switch (s.type) {
  case dpo::LossType::Sigmoid:
    return -(1 - s.labelSmoothing) * std::log(sigmoid(s.beta * delta)) -
           s.labelSmoothing * std::log(sigmoid(-s.beta * delta));
  case dpo::LossType::Robust: // TRL's clean term minus its flipped term
    return (-(1 - s.labelSmoothing) * std::log(sigmoid(s.beta * delta)) -
            -s.labelSmoothing * std::log(sigmoid(-s.beta * delta))) /
           (1 - 2 * s.labelSmoothing);
  case dpo::LossType::Hinge:
    return std::max(0.0, 1 - s.beta * delta);
  case dpo::LossType::Ipo: {
    double d = chosen / std::max<double>(p.chosenTokens, 1) -
               rejected / std::max<double>(p.rejectedTokens, 1);
    return std::pow(d - 1 / (2 * s.beta), 2);
  }
  }
  return NAN;
}

const std::vector<dpo::Pair> kPairs = {
    {-12.5, -14.0, -13.0, -13.5, 5, 7},
    {-30.25, -9.5, -29.0, -11.0, 12, 3},
    {-3.0, -3.0, -3.0, -3.0, 1, 1},
    {-80.0, -20.0, -60.0, -40.0, 40, 9},
};

TEST(Dpo, EachLossIsTrlsDefinition) {
  for (dpo::Settings s : {dpo::Settings{dpo::LossType::Sigmoid, 0.1, 0},
                          dpo::Settings{dpo::LossType::Sigmoid, 0.5, 0.2},
                          dpo::Settings{dpo::LossType::Robust, 0.5, 0.2},
                          dpo::Settings{dpo::LossType::Robust, 0.1, 0},
                          dpo::Settings{dpo::LossType::Hinge, 0.3, 0},
                          dpo::Settings{dpo::LossType::Ipo, 0.1, 0}})
    for (const dpo::Pair &p : kPairs)
      EXPECT_NEAR(dpo::loss(s, p), naiveLoss(s, p),
                  1e-12 * std::max(1.0, naiveLoss(s, p)))
          << int(s.type) << " " << p.policyChosen;
  // A margin of 2000 at beta 1: sigmoid's loss is 0 and 2000 the other
  // way, with no overflow.
  dpo::Settings sigmoid{dpo::LossType::Sigmoid, 1.0, 0};
  EXPECT_EQ(dpo::loss(sigmoid, {0, -2000, 0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(dpo::loss(sigmoid, {-2000, 0, 0, 0, 1, 1}), 2000.0);
}

TEST(Dpo, GradientIsTheLossesSlope) {
  for (dpo::Settings s : {dpo::Settings{dpo::LossType::Sigmoid, 0.1, 0},
                          dpo::Settings{dpo::LossType::Sigmoid, 0.5, 0.2},
                          dpo::Settings{dpo::LossType::Robust, 0.5, 0.2},
                          dpo::Settings{dpo::LossType::Robust, 0.1, 0},
                          dpo::Settings{dpo::LossType::Hinge, 0.3, 0},
                          dpo::Settings{dpo::LossType::Ipo, 0.1, 0}})
    for (const dpo::Pair &p : kPairs) {
      const double h = 1e-5;
      auto moved = [&](double dc, double dr) {
        dpo::Pair q = p;
        q.policyChosen += dc;
        q.policyRejected += dr;
        return dpo::loss(s, q);
      };
      dpo::Gradient g = dpo::gradient(s, p);
      EXPECT_NEAR(g.chosen, (moved(h, 0) - moved(-h, 0)) / (2 * h), 1e-6)
          << int(s.type) << " " << p.policyChosen;
      EXPECT_NEAR(g.rejected, (moved(0, h) - moved(0, -h)) / (2 * h), 1e-6)
          << int(s.type) << " " << p.policyChosen;
    }
}

// The sums over a micro-batch: only pairs with a token in each completion,
// in pair order; the metrics TRL logs (before its means); a pair not
// counted has no gradient.
TEST(Dpo, SumsCountOnlyPairsWithBothCompletions) {
  dpo::Settings s{dpo::LossType::Sigmoid, 0.1, 0};
  std::vector<float> policy = {-12.5f, -14.0f, -1.0f, -2.0f, -30.25f, -9.5f};
  std::vector<float> reference = {-13.0f, -13.5f, -1.0f, -1.0f, -29.0f, -11.0f};
  std::vector<int64_t> tokens = {5, 7, 0, 4, 12, 3}; // the second: padding
  float loss, metrics[dpo::kMetrics];
  int64_t counted;
  dpo::sumPairs(policy.data(), reference.data(), tokens.data(), 3, s, &loss,
                &counted, metrics);
  EXPECT_EQ(counted, 2);
  dpo::Pair first =
                dpo::pairAt(policy.data(), reference.data(), tokens.data(), 0),
            third =
                dpo::pairAt(policy.data(), reference.data(), tokens.data(), 2);
  EXPECT_FLOAT_EQ(loss, float(naiveLoss(s, first) + naiveLoss(s, third)));
  double chosen[] = {0.1 * 0.5, 0.1 * -1.25},
         rejected[] = {0.1 * -0.5, 0.1 * 1.5};
  EXPECT_FLOAT_EQ(metrics[0], float(chosen[0] + chosen[1]));
  EXPECT_FLOAT_EQ(metrics[1], float(rejected[0] + rejected[1]));
  EXPECT_EQ(metrics[2], 1.0f); // only the first pair's chosen is ahead
  EXPECT_FLOAT_EQ(metrics[3],
                  float(chosen[0] - rejected[0] + chosen[1] - rejected[1]));
  EXPECT_EQ(metrics[4], -12.5f + -30.25f);
  EXPECT_EQ(metrics[5], -14.0f + -9.5f);
  std::vector<float> grad(6, 7.0f);
  for (int64_t i = 0; i < 3; ++i)
    dpo::pairGradient(policy.data(), reference.data(), tokens.data(), i, s,
                      2.0f, grad.data());
  EXPECT_EQ(grad[2], 0.0f);
  EXPECT_EQ(grad[3], 0.0f);
  EXPECT_FLOAT_EQ(grad[0], float(2 * dpo::gradient(s, first).chosen));
  EXPECT_FLOAT_EQ(grad[5], float(2 * dpo::gradient(s, third).rejected));
}

} // namespace
