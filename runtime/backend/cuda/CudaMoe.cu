//===- CudaMoe.cu - a mixture of experts' routing -------------------------===//
//
// route and route_grad: one thread a token, each running support/Routing.h's
// function of a token, as the cpu does; k passes over a token's experts
// are little beside its experts' matmuls. The runners sit beside their
// kernels: nothing else launches them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/shapes/ShapeRule.h"
#include "support/Routing.h"

using namespace twill;

namespace {

constexpr int kThreads = 128;

int blocksFor(int64_t tokens) {
  return int((tokens + kThreads - 1) / kThreads);
}

__global__ void routeKernel(const float *logits, int64_t tokens,
                            int64_t experts, int64_t k, bool normalize,
                            float *weights, int32_t *indices) {
  int64_t token = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (token < tokens)
    routing::route(logits + token * experts, experts, k, normalize,
                   weights + token * k, indices + token * k);
}

/// A token with an index outside the experts gets a gradient of zeros (the
/// cpu refuses it; route never makes one).
__global__ void routeGradKernel(const float *logits, int64_t tokens,
                                int64_t experts, const int32_t *indices,
                                const float *grad, int64_t k, bool normalize,
                                float *result) {
  int64_t token = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (token >= tokens)
    return;
  const int32_t *chosen = indices + token * k;
  float *out = result + token * experts;
  for (int64_t j = 0; j < k; ++j)
    if (chosen[j] < 0 || chosen[j] >= experts) {
      for (int64_t e = 0; e < experts; ++e)
        out[e] = 0;
      return;
    }
  routing::routeGrad(logits + token * experts, experts, chosen,
                     grad + token * k, k, normalize, out);
}

} // namespace

llvm::Error cuda::runRoute(const InstructionView &in, Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(1, 2, {F32, F32, I32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0), tokens = in.count(1) / k;
  if (tokens == 0)
    return llvm::Error::success();
  routeKernel<<<blocksFor(tokens), kThreads, 0, device.stream>>>(
      in.data<float>(0), tokens, experts, k, in->route().normalize(),
      in.data<float>(1), in.data<int32_t>(2));
  return checkCuda(cudaGetLastError(), "route");
}

llvm::Error cuda::runRouteGrad(const InstructionView &in, Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0), k = in.dim(1, 0), tokens = in.count(1) / k;
  if (tokens == 0)
    return llvm::Error::success();
  routeGradKernel<<<blocksFor(tokens), kThreads, 0, device.stream>>>(
      in.data<float>(0), tokens, experts, in.data<int32_t>(1),
      in.data<float>(2), k, in->route().normalize(), in.data<float>(3));
  return checkCuda(cudaGetLastError(), "route_grad");
}
