//===- ElementMath.h - the element math both backends run -------*- C++ -*-===//
//
// Each formula the cpu and cuda kernels apply element by element, written
// once: the gated activations (SwiGLU, GeGLU, a sigmoid gate) and their
// gradients, the soft cap, and the optimizer's scalars and AdamW's update,
// in the float order that matches PyTorch. A backend passes its own exponential
// where a formula takes one (the cpu its vectorized expApprox, cuda expf), so
// that each loop stays what its compiler vectorizes; the formula around it is
// this one.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_ELEMENTMATH_H
#define TWILL_SUPPORT_ELEMENTMATH_H

#include "support/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace twill::math {

/// SiLU's gate times `up`: gate / (1 + e^-gate) * up.
template <typename Exp>
TWILL_HOST_DEVICE inline float swiglu(float gate, float up, Exp exp) {
  return gate / (1.0f + exp(-gate)) * up;
}

/// SwiGLU's gradients with respect to its gate and its up input.
template <typename Exp>
TWILL_HOST_DEVICE inline void swigluGrad(float gate, float up, float grad,
                                         float &gateGrad, float &upGrad,
                                         Exp exp) {
  float sigmoid = 1.0f / (1.0f + exp(-gate));
  float silu = gate * sigmoid;
  upGrad = grad * silu;
  gateGrad = grad * up * sigmoid * (1.0f + gate * (1.0f - sigmoid));
}

/// The sigmoid of the gate times `up`: up / (1 + e^-gate) (Qwen2-MoE's
/// shared expert behind its gate).
template <typename Exp>
TWILL_HOST_DEVICE inline float sigmoidGate(float gate, float up, Exp exp) {
  return up / (1.0f + exp(-gate));
}

/// Its gradients: d sigmoid / d gate = s (1 - s).
template <typename Exp>
TWILL_HOST_DEVICE inline void sigmoidGateGrad(float gate, float up, float grad,
                                              float &gateGrad, float &upGrad,
                                              Exp exp) {
  float sigmoid = 1.0f / (1.0f + exp(-gate));
  upGrad = grad * sigmoid;
  gateGrad = grad * up * sigmoid * (1.0f - sigmoid);
}

/// GELU's tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2 / pi) (x +
/// 0.044715 x^3), is x s with s = sigmoid(2u) = (1 + tanh(u)) / 2: no
/// 1 + tanh to cancel where u is very negative. Returns s, and 2 du/dx.
template <typename Exp>
TWILL_HOST_DEVICE inline float geluSigmoid(float x, float &twoDudx, Exp exp) {
  constexpr float kRoot2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  float u = kRoot2OverPi * (x + kCubic * x * x * x);
  twoDudx = 2.0f * kRoot2OverPi * (1.0f + 3.0f * kCubic * x * x);
  return 1.0f / (1.0f + exp(-2.0f * u));
}

/// GELU (tanh form) of the gate times `up`.
template <typename Exp>
TWILL_HOST_DEVICE inline float geglu(float gate, float up, Exp exp) {
  float twoDudx, s = geluSigmoid(gate, twoDudx, exp);
  return gate * s * up;
}

/// GeGLU's gradients: d(x s)/dx = s + x s (1 - s) 2 du/dx.
template <typename Exp>
TWILL_HOST_DEVICE inline void gegluGrad(float gate, float up, float grad,
                                        float &gateGrad, float &upGrad,
                                        Exp exp) {
  float twoDudx, s = geluSigmoid(gate, twoDudx, exp);
  upGrad = grad * gate * s;
  gateGrad = grad * up * (s + gate * s * (1.0f - s) * twoDudx);
}

/// Gemma's soft cap, cap * tanh(x / cap), and its gradient.
TWILL_HOST_DEVICE inline float softcap(float x, float cap) {
  return cap * tanhf(x / cap);
}
TWILL_HOST_DEVICE inline float softcapGrad(float x, float grad, float cap) {
  float t = tanhf(x / cap);
  return grad * (1.0f - t * t);
}

/// Gradient clipping's coefficient for a global norm: at most 1.
TWILL_HOST_DEVICE inline float clipCoefficient(float norm, double maxNorm) {
  return float(fmin(1.0, maxNorm / (double(norm) + 1e-6)));
}

/// The learning rate at `step`: a linear warmup, then a half cosine to 0
/// at `totalSteps`.
TWILL_HOST_DEVICE inline float scheduledLr(int64_t step, int64_t totalSteps,
                                           double lr, int64_t warmupSteps) {
  if (step < warmupSteps)
    return float(lr * double(step) / double(warmupSteps > 1 ? warmupSteps : 1));
  int64_t span = totalSteps - warmupSteps > 1 ? totalSteps - warmupSteps : 1;
  double progress = double(step - warmupSteps) / double(span);
  return float(lr * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress))));
}

/// One AdamW step's scalars, as PyTorch computes them (in double) before
/// its float element ops.
struct AdamWStep {
  float decay, stepSize, correction2Sqrt, oneMinusBeta1, beta2, oneMinusBeta2,
      eps;
};
/// The scalars of the update to step `step` + 1.
TWILL_HOST_DEVICE inline AdamWStep adamwStep(double lr, int64_t step,
                                             double beta1, double beta2,
                                             double eps, double weightDecay) {
  double t = double(step + 1);
  return {float(1.0 - lr * weightDecay),
          float(lr / (1.0 - pow(beta1, t))),
          float(sqrt(1.0 - pow(beta2, t))),
          float(1.0 - beta1),
          float(beta2),
          float(1.0 - beta2),
          float(eps)};
}
/// AdamW's update of one element, in torch.optim.AdamW's float order:
/// `param`, `expAvg` and `expAvgSq` become the new ones.
TWILL_HOST_DEVICE inline void adamwUpdate(const AdamWStep &s, float grad,
                                          float &param, float &expAvg,
                                          float &expAvgSq) {
  float p = param * s.decay;
  float m = expAvg + s.oneMinusBeta1 * (grad - expAvg);
  float v = expAvgSq * s.beta2 + s.oneMinusBeta2 * grad * grad;
  float denom = sqrtf(v) / s.correction2Sqrt + s.eps;
  param = p - s.stepSize * (m / denom);
  expAvg = m;
  expAvgSq = v;
}

} // namespace twill::math

#endif // TWILL_SUPPORT_ELEMENTMATH_H
