//===- Dpo.h - DPO's loss of a preference pair ------------------*- C++ -*-===//
//
// The loss of one preference pair from its four log-probabilities (each the
// sum over a completion's tokens: the policy's and the reference's, of the
// chosen and the rejected completion), as TRL's DPOTrainer defines it, and
// its gradient with respect to the policy's two; and the sums over a
// micro-batch's pairs. Both backends' dpo_loss kernels are these
// functions, in double.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_DPO_H
#define TWILL_SUPPORT_DPO_H

#include "support/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>

namespace twill::dpo {

/// The loss types (proto DpoLossAttributes.LossType's values).
enum class LossType : int { Sigmoid = 0, Ipo = 1, Hinge = 2, Robust = 3 };

/// The loss type an IR attribute (dpo_loss's `loss_type`) names.
inline bool lossTypeNamed(const char *name, LossType &type) {
  for (auto [spelling, value] :
       {std::pair{"sigmoid", LossType::Sigmoid},
        std::pair{"ipo", LossType::Ipo}, std::pair{"hinge", LossType::Hinge},
        std::pair{"robust", LossType::Robust}})
    if (std::string_view(name) == spelling) {
      type = value;
      return true;
    }
  return false;
}

/// What a pair's loss reads besides its log-probabilities.
struct Settings {
  LossType type;
  double beta;
  /// Sigmoid's and robust's: the chance that a pair's preference is the
  /// other way.
  double labelSmoothing;
};

/// A pair's log-probabilities and its completions' token counts.
struct Pair {
  double policyChosen, policyRejected, referenceChosen, referenceRejected;
  int64_t chosenTokens, rejectedTokens;

  /// Only a pair with a token of each completion is trained on (padding
  /// rows have none).
  TWILL_HOST_DEVICE bool counted() const {
    return chosenTokens > 0 && rejectedTokens > 0;
  }
  /// TRL's rewards: beta times each completion's log-ratio.
  TWILL_HOST_DEVICE double chosenReward(double beta) const {
    return beta * (policyChosen - referenceChosen);
  }
  TWILL_HOST_DEVICE double rejectedReward(double beta) const {
    return beta * (policyRejected - referenceRejected);
  }
};

/// log(sigmoid(x)) without overflow: -(max(-x, 0) + log1p(exp(-|x|))).
TWILL_HOST_DEVICE inline double logSigmoid(double x) {
  return -(fmax(-x, 0.0) + log1p(exp(-fabs(x))));
}

TWILL_HOST_DEVICE inline double sigmoid(double x) {
  return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x));
}

/// IPO's difference of the log-ratios, each per token of its completion.
TWILL_HOST_DEVICE inline double ipoDelta(const Pair &p) {
  return (p.policyChosen - p.referenceChosen) /
             fmax(double(p.chosenTokens), 1.0) -
         (p.policyRejected - p.referenceRejected) /
             fmax(double(p.rejectedTokens), 1.0);
}

/// The pair's loss:
///   sigmoid: -(1 - e) log s(b d) - e log s(-b d)   (e = label_smoothing:
///            conservative DPO, which TRL 1.16's sigmoid no longer reads)
///   robust:  (-(1 - e) log s(b d) + e log s(-b d)) / (1 - 2 e)
///            (Robust DPO's unbiased loss, TRL's "robust")
///   hinge:   relu(1 - b d)
///   ipo:     (d_ipo - 1 / (2 b))^2
/// with d the difference of the log-ratios (chosen minus rejected).
TWILL_HOST_DEVICE inline double loss(const Settings &s, const Pair &p) {
  double delta = (p.policyChosen - p.referenceChosen) -
                 (p.policyRejected - p.referenceRejected);
  switch (s.type) {
  case LossType::Sigmoid:
    return -(1 - s.labelSmoothing) * logSigmoid(s.beta * delta) -
           s.labelSmoothing * logSigmoid(-s.beta * delta);
  case LossType::Robust:
    return (-(1 - s.labelSmoothing) * logSigmoid(s.beta * delta) +
            s.labelSmoothing * logSigmoid(-s.beta * delta)) /
           (1 - 2 * s.labelSmoothing);
  case LossType::Hinge:
    return fmax(1 - s.beta * delta, 0.0);
  case LossType::Ipo: {
    double gap = ipoDelta(p) - 1 / (2 * s.beta);
    return gap * gap;
  }
  }
  return NAN;
}

/// The loss's derivatives with respect to the policy's chosen and rejected
/// log-probabilities.
struct Gradient {
  double chosen, rejected;
};

TWILL_HOST_DEVICE inline Gradient gradient(const Settings &s, const Pair &p) {
  double delta = (p.policyChosen - p.referenceChosen) -
                 (p.policyRejected - p.referenceRejected);
  double slope = NAN; // d loss / d delta
  switch (s.type) {
  case LossType::Sigmoid:
    slope = s.beta * (sigmoid(s.beta * delta) - (1 - s.labelSmoothing));
    break;
  case LossType::Robust:
    slope = s.beta * (sigmoid(s.beta * delta) -
                      (1 - s.labelSmoothing) / (1 - 2 * s.labelSmoothing));
    break;
  case LossType::Hinge: // torch's relu passes nothing at 0
    slope = 1 - s.beta * delta > 0 ? -s.beta : 0.0;
    break;
  case LossType::Ipo: {
    double twice = 2 * (ipoDelta(p) - 1 / (2 * s.beta));
    return {twice / fmax(double(p.chosenTokens), 1.0),
            -twice / fmax(double(p.rejectedTokens), 1.0)};
  }
  }
  return {slope, -slope};
}

/// The sums a step reports, in this order (dpo_loss's `metrics`): the
/// rewards of the chosen and the rejected completions, the pairs whose
/// chosen reward is the greater, the margins, and the policy's chosen and
/// rejected log-probabilities, over the counted pairs.
inline constexpr int64_t kMetrics = 6;
/// TRL's names for their means over the pairs.
inline constexpr const char *kMetricNames[kMetrics] = {
    "rewards/chosen",  "rewards/rejected", "rewards/accuracies",
    "rewards/margins", "logps/chosen",     "logps/rejected"};

/// Pair `i` of dpo_loss's `[pairs, 2]` operands.
TWILL_HOST_DEVICE inline Pair pairAt(const float *policy,
                                     const float *reference,
                                     const int64_t *tokens, int64_t i) {
  return {policy[2 * i],        policy[2 * i + 1], reference[2 * i],
          reference[2 * i + 1], tokens[2 * i],     tokens[2 * i + 1]};
}

/// dpo_loss: the loss and the metrics summed over the counted pairs in
/// pair order, in double, and how many those are.
TWILL_HOST_DEVICE inline void sumPairs(const float *policy,
                                       const float *reference,
                                       const int64_t *tokens, int64_t pairs,
                                       const Settings &s, float *loss,
                                       int64_t *counted, float *metrics) {
  double total = 0, sums[kMetrics] = {};
  int64_t count = 0;
  for (int64_t i = 0; i < pairs; ++i) {
    Pair p = pairAt(policy, reference, tokens, i);
    if (!p.counted())
      continue;
    total += dpo::loss(s, p);
    ++count;
    double chosen = p.chosenReward(s.beta), rejected = p.rejectedReward(s.beta);
    double values[kMetrics] = {chosen,
                               rejected,
                               chosen > rejected ? 1.0 : 0.0,
                               chosen - rejected,
                               p.policyChosen,
                               p.policyRejected};
    for (int m = 0; m < kMetrics; ++m)
      sums[m] += values[m];
  }
  *loss = float(total);
  *counted = count;
  for (int m = 0; m < kMetrics; ++m)
    metrics[m] = float(sums[m]);
}

/// dpo_loss_grad of pair `i`: `lossGrad` times its loss's derivatives with
/// respect to the policy's two log-probabilities (zero for a pair not
/// counted), into `out`'s row `i`.
TWILL_HOST_DEVICE inline void
pairGradient(const float *policy, const float *reference, const int64_t *tokens,
             int64_t i, const Settings &s, float lossGrad, float *out) {
  Pair p = pairAt(policy, reference, tokens, i);
  Gradient g = p.counted() ? gradient(s, p) : Gradient{0, 0};
  out[2 * i] = float(g.chosen * lossGrad);
  out[2 * i + 1] = float(g.rejected * lossGrad);
}

} // namespace twill::dpo

#endif // TWILL_SUPPORT_DPO_H
