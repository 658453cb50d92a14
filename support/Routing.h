//===- Routing.h - a token's top-k experts ----------------------*- C++ -*-===//
//
// A mixture-of-experts router's choice for one token from its logits, as
// transformers computes it for Qwen3-MoE, Qwen2-MoE and Mixtral: the
// softmax over the experts in fp32, the k most probable experts, their
// probabilities divided by their sum where `normalize` (norm_topk_prob);
// and its gradient. Both backends' route and route_grad kernels are these
// functions, one token a call; so are the load-balancing loss's
// (expert_load's gradient, the loss and its gradient).
//
// Experts are chosen by their logits (the softmax keeps their order; its
// rounding could tie two that differ), the larger first, a tie to the
// lower expert: a choice both backends make alike. torch.topk leaves the
// order of ties to its implementation.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_ROUTING_H
#define TWILL_SUPPORT_ROUTING_H

#include "support/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace twill::routing {

/// A token's softmax over its experts: p(logit) = exp(logit - max) / sum.
struct Softmax {
  float max, sum;
  TWILL_HOST_DEVICE float operator()(float logit) const {
    return expf(logit - max) / sum;
  }
};

TWILL_HOST_DEVICE inline Softmax softmaxOf(const float *logits,
                                           int64_t experts) {
  float max = logits[0];
  for (int64_t e = 1; e < experts; ++e)
    max = fmaxf(max, logits[e]);
  float sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += expf(logits[e] - max);
  return {max, sum};
}

/// Whether expert `a` comes before expert `b` in the choice: a larger
/// logit, or the same and a lower index.
TWILL_HOST_DEVICE inline bool before(const float *logits, int64_t a,
                                     int64_t b) {
  return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/// The token's k experts in the order of the choice, and their weights.
TWILL_HOST_DEVICE inline void route(const float *logits, int64_t experts,
                                    int64_t k, bool normalize, float *weights,
                                    int32_t *indices) {
  Softmax p = softmaxOf(logits, experts);
  float total = 0;
  for (int64_t j = 0; j < k; ++j) {
    // The first expert after the one chosen last.
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e)
      if ((j == 0 || before(logits, indices[j - 1], e)) &&
          (best < 0 || before(logits, e, best)))
        best = e;
    indices[j] = int32_t(best);
    weights[j] = p(logits[best]);
    total += weights[j];
  }
  if (normalize)
    for (int64_t j = 0; j < k; ++j)
      weights[j] /= total;
}

/// dL/dlogits of the token (`result`, [experts]) from dL/dweights
/// (`grad`, [k]) of its experts `indices`. With p the softmax and w_j =
/// p(i_j) / S (S = the sum of the k, or 1 without `normalize`): dL/dp(i_j)
/// = (g_j - sum_m g_m w_m) / S normalized, g_j not; then the softmax's
/// dL/dlogit_e = p_e (dL/dp_e - sum_f p_f dL/dp_f).
TWILL_HOST_DEVICE inline void routeGrad(const float *logits, int64_t experts,
                                        const int32_t *indices,
                                        const float *grad, int64_t k,
                                        bool normalize, float *result) {
  Softmax p = softmaxOf(logits, experts);
  float total = 0, weighted = 0;
  for (int64_t j = 0; j < k; ++j) {
    float chosen = p(logits[indices[j]]);
    total += chosen;
    weighted += grad[j] * chosen;
  }
  auto byProbability = [&](int64_t j) { // dL/dp at the j-th expert
    return normalize ? (grad[j] - weighted / total) / total : grad[j];
  };
  float mean = 0; // sum_f p_f dL/dp_f
  for (int64_t j = 0; j < k; ++j)
    mean += p(logits[indices[j]]) * byProbability(j);
  for (int64_t e = 0; e < experts; ++e)
    result[e] = -p(logits[e]) * mean;
  for (int64_t j = 0; j < k; ++j)
    result[indices[j]] += p(logits[indices[j]]) * byProbability(j);
}

/// Whether a token's k experts `indices` include `expert`.
TWILL_HOST_DEVICE inline bool chose(const int32_t *indices, int64_t k,
                                    int64_t expert) {
  for (int64_t j = 0; j < k; ++j)
    if (indices[j] == expert)
      return true;
  return false;
}

/// dL/dlogits of a token (`result`, [experts]) from dL/dp of its whole
/// softmax (`grad`, [experts]): p_e (g_e - sum_f p_f g_f). expert_load's
/// gradient, a token its mask keeps.
TWILL_HOST_DEVICE inline void softmaxGrad(const float *logits, int64_t experts,
                                          const float *grad, float *result) {
  Softmax p = softmaxOf(logits, experts);
  float mean = 0;
  for (int64_t e = 0; e < experts; ++e)
    mean += p(logits[e]) * grad[e];
  for (int64_t e = 0; e < experts; ++e)
    result[e] = p(logits[e]) * (grad[e] - mean);
}

/// The Switch Transformer's load-balancing loss, as transformers'
/// load_balancing_loss_func: experts * sum_e (counts_e / tokens)
/// (probabilities_e / tokens), of each expert's chosen count and summed
/// probability over `tokens` tokens (every sparse layer's tokens counted
/// once a layer); 0 without tokens.
TWILL_HOST_DEVICE inline float loadBalancingLoss(const float *probabilities,
                                                 const float *counts,
                                                 float tokens,
                                                 int64_t experts) {
  if (tokens <= 0)
    return 0;
  float sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += (counts[e] / tokens) * (probabilities[e] / tokens);
  return float(experts) * sum;
}

/// dL/dprobabilities_e of that loss from dL/dloss (`grad`): the counts are
/// the choice's, constant.
TWILL_HOST_DEVICE inline float
loadBalancingLossGrad(float count, float tokens, int64_t experts, float grad) {
  return tokens <= 0 ? 0.0f : grad * float(experts) * (count / tokens) / tokens;
}

} // namespace twill::routing

#endif // TWILL_SUPPORT_ROUTING_H
