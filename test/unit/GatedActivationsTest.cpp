//===- GatedActivationsTest.cpp - gated activations against loops ---------===//
//
// SwiGLU, GeGLU and the sigmoid gate (Qwen2-MoE's shared expert), and
// their gradients, on the cpu against their formulas in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuKernels.h"
#include "test/unit/RandomValues.h"

#include "gtest/gtest.h"

#include <cmath>
#include <vector>

using namespace twill;

namespace {

using test::expectClose;
using test::randomValues;

// d/dgate silu(gate) = s + gate s (1 - s), s = sigmoid(gate); gates up to
// +-20 reach both saturated ends.
TEST(CpuKernels, SwigluGradIsTheDerivativeOfSiluTimesUp) {
  const int64_t count = 67;
  std::vector<float> gate = randomValues(count, 33);
  std::vector<float> up = randomValues(count, 34);
  std::vector<float> grad = randomValues(count, 35);
  for (float &g : gate)
    g *= 8;
  gate[0] = -20;
  gate[1] = 20;
  std::vector<double> gateGrad(count), upGrad(count);
  for (int64_t i = 0; i < count; ++i) {
    double s = 1 / (1 + std::exp(-double(gate[i])));
    upGrad[i] = double(grad[i]) * gate[i] * s;
    gateGrad[i] = double(grad[i]) * up[i] * (s + gate[i] * s * (1 - s));
  }
  std::vector<float> outGate(count), outUp(count);
  cpu::swigluGrad(gate.data(), up.data(), grad.data(), outGate.data(),
                  outUp.data(), count);
  expectClose(outGate, gateGrad, 1e-6, 1e-7);
  expectClose(outUp, upGrad, 1e-6, 1e-7);
}

// GELU's tanh form as PyTorch's gelu(approximate="tanh") writes it, in
// double; gates up to +-20 reach both saturated ends of the tanh.
TEST(CpuKernels, GegluAndItsGradientAreGeluTanhTimesUp) {
  const int64_t count = 67;
  std::vector<float> gate = randomValues(count, 37);
  std::vector<float> up = randomValues(count, 38);
  std::vector<float> grad = randomValues(count, 39);
  for (float &g : gate)
    g *= 4;
  gate[0] = -20;
  gate[1] = 20;
  std::vector<double> out(count), gateGrad(count), upGrad(count);
  const double c = std::sqrt(2 / M_PI), a = 0.044715;
  for (int64_t i = 0; i < count; ++i) {
    double x = gate[i], t = std::tanh(c * (x + a * x * x * x));
    double gelu = 0.5 * x * (1 + t);
    out[i] = gelu * up[i];
    upGrad[i] = double(grad[i]) * gelu;
    gateGrad[i] =
        double(grad[i]) * up[i] *
        (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x));
  }
  std::vector<float> values(count), outGate(count), outUp(count);
  cpu::geglu(gate.data(), up.data(), values.data(), count);
  expectClose(values, out, 1e-6, 1e-7);
  cpu::gegluGrad(gate.data(), up.data(), grad.data(), outGate.data(),
                 outUp.data(), count);
  expectClose(outGate, gateGrad, 1e-6, 1e-7);
  expectClose(outUp, upGrad, 1e-6, 1e-7);
}

// sigmoid(gate) * up and its gradients, s (1 - s) up for the gate; gates
// up to +-20 reach both saturated ends.
TEST(CpuKernels, SigmoidGateAndItsGradientAreSigmoidTimesUp) {
  const int64_t count = 67;
  std::vector<float> gate = randomValues(count, 42);
  std::vector<float> up = randomValues(count, 43);
  std::vector<float> grad = randomValues(count, 44);
  for (float &g : gate)
    g *= 8;
  gate[0] = -20;
  gate[1] = 20;
  std::vector<double> out(count), gateGrad(count), upGrad(count);
  for (int64_t i = 0; i < count; ++i) {
    double s = 1 / (1 + std::exp(-double(gate[i])));
    out[i] = s * up[i];
    upGrad[i] = double(grad[i]) * s;
    gateGrad[i] = double(grad[i]) * up[i] * s * (1 - s);
  }
  std::vector<float> values(count), outGate(count), outUp(count);
  cpu::sigmoidGate(gate.data(), up.data(), values.data(), count);
  expectClose(values, out, 1e-6, 1e-7);
  cpu::sigmoidGateGrad(gate.data(), up.data(), grad.data(), outGate.data(),
                       outUp.data(), count);
  expectClose(outGate, gateGrad, 1e-6, 1e-7);
  expectClose(outUp, upGrad, 1e-6, 1e-7);
}

} // namespace
