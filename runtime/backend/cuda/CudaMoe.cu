//===- CudaMoe.cu - a mixture of experts' routing and dispatch ------------===//
//
// route and route_grad: one thread a token, each running support/Routing.h's
// function of a token, as the cpu does; k passes over a token's experts
// are little beside its experts' matmuls. expert_positions: one thread a
// group running support/Dispatch.h's sort, the cpu's (a pass over a
// group's slots, little beside its experts' matmuls); dispatch and
// combine a thread an element, combine_weights_grad a thread a slot. A
// position outside its group's rows takes no row (the cpu refuses it;
// expert_positions makes none). grouped_matmul and its weight's gradient:
// a cuBLASLt GEMM an expert a group, whose sizes the host reads: it waits
// for the counts (a few hundred bytes) before it queues them. The
// load-balancing loss: expert_load a block an expert (a block's sum),
// its gradient a thread a token, the loss one thread. The runners sit
// beside their kernels: nothing else launches them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/shapes/MoeShapes.h"
#include "support/Dispatch.h"
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

__global__ void expertPositionsKernel(const int32_t *indices, int64_t groups,
                                      int64_t slots, int64_t experts,
                                      int32_t *positions, int32_t *counts) {
  int64_t group = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (group < groups)
    dispatch::expertPositions(indices + group * slots, slots, experts,
                              positions + group * slots,
                              counts + group * experts);
}

/// The row of `slot` (over every group's) among the rows of all groups,
/// or -1 for none.
__device__ int64_t rowOf(const DispatchShape &size, const int32_t *positions,
                         int64_t slot) {
  int32_t position = positions[slot];
  if (position < 0 || position >= size.rows())
    return -1;
  return slot / size.rows() * size.rows() + position;
}

__global__ void dispatchKernel(const float *input, const int32_t *positions,
                               const float *weights, DispatchShape size,
                               float *rows) {
  int64_t element = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (element >= size.groups * size.rows() * size.width)
    return;
  int64_t slot = element / size.width, h = element % size.width;
  int64_t row = rowOf(size, positions, slot);
  if (row >= 0)
    rows[row * size.width + h] = input[slot / size.k * size.width + h] *
                                 (weights ? weights[slot] : 1.0f);
}

__global__ void combineKernel(const float *rows, const int32_t *positions,
                              const float *weights, DispatchShape size,
                              float *result) {
  int64_t element = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (element >= size.groups * size.tokens * size.width)
    return;
  int64_t token = element / size.width, h = element % size.width;
  const int32_t *position = positions + token * size.k;
  for (int64_t j = 0; j < size.k; ++j) // none out of its group's rows
    if (position[j] >= size.rows()) {
      result[element] = 0;
      return;
    }
  result[element] = dispatch::combineElement(
      rows + token / size.tokens * size.rows() * size.width, position,
      weights ? weights + token * size.k : nullptr, size.k, size.width, h);
}

__global__ void combineWeightsGradKernel(const float *rows,
                                         const int32_t *positions,
                                         const float *grad, DispatchShape size,
                                         float *result) {
  int64_t slot = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (slot >= size.groups * size.rows())
    return;
  int64_t row = rowOf(size, positions, slot);
  result[slot] =
      row < 0
          ? 0.0f
          : dispatch::weightGrad(rows + row * size.width,
                                 grad + slot / size.k * size.width, size.width);
}

/// `value` summed over the block (kThreads threads) by halves, the same
/// order every run; thread 0 gets it.
__device__ double blockSum(double value) {
  __shared__ double partial[kThreads];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  double total = partial[0];
  __syncthreads(); // before the next sum writes
  return total;
}

/// expert_load: a block an expert, its threads over the tokens, summed in
/// double; block 0 also counts the kept tokens. A token's softmax is
/// recomputed by each expert's block: experts x the route's work, little
/// beside the experts' matmuls, and no scratch.
__global__ void expertLoadKernel(const float *logits, const int32_t *indices,
                                 const int32_t *mask, int64_t tokens,
                                 int64_t experts, int64_t k,
                                 float *probabilities, float *counts,
                                 float *kept) {
  int64_t expert = blockIdx.x;
  double probability = 0, count = 0, tokensKept = 0;
  for (int64_t t = threadIdx.x; t < tokens; t += kThreads) {
    if (!mask[t])
      continue;
    const float *row = logits + t * experts;
    probability += routing::softmaxOf(row, experts)(row[expert]);
    count += routing::chose(indices + t * k, k, expert);
    tokensKept += 1;
  }
  probability = blockSum(probability);
  count = blockSum(count);
  tokensKept = blockSum(tokensKept);
  if (threadIdx.x != 0)
    return;
  probabilities[expert] = float(probability);
  counts[expert] = float(count);
  if (expert == 0)
    *kept = float(tokensKept);
}

__global__ void expertLoadGradKernel(const float *logits, const int32_t *mask,
                                     const float *grad, int64_t tokens,
                                     int64_t experts, float *result) {
  int64_t token = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (token >= tokens)
    return;
  float *out = result + token * experts;
  if (mask[token]) {
    routing::softmaxGrad(logits + token * experts, experts, grad, out);
    return;
  }
  for (int64_t e = 0; e < experts; ++e)
    out[e] = 0;
}

__global__ void loadBalancingLossKernel(const float *probabilities,
                                        const float *counts,
                                        const float *tokens, int64_t experts,
                                        float *loss) {
  *loss = routing::loadBalancingLoss(probabilities, counts, *tokens, experts);
}

__global__ void loadBalancingLossGradKernel(const float *counts,
                                            const float *tokens,
                                            const float *grad, int64_t experts,
                                            float *result) {
  int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < experts)
    result[e] =
        routing::loadBalancingLossGrad(counts[e], *tokens, experts, *grad);
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

llvm::Error cuda::runExpertPositions(const InstructionView &in,
                                     Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(1, 2, {I32, I32, I32}))
    return error;
  int64_t groups = in.dim(2, 1), experts = in.dim(2, 0);
  if (in.count(0) == 0)
    return llvm::Error::success();
  expertPositionsKernel<<<blocksFor(groups), kThreads, 0, device.stream>>>(
      in.data<int32_t>(0), groups, in.count(0) / groups, experts,
      in.data<int32_t>(1), in.data<int32_t>(2));
  return checkCuda(cudaGetLastError(), "expert_positions");
}

llvm::Error cuda::runDispatch(const InstructionView &in, Device &device) {
  llvm::Expected<DispatchShape> size = dispatchShape(in);
  if (!size)
    return size.takeError();
  int64_t elements = size->groups * size->rows() * size->width;
  float *rows = in.data<float>(in.numOperands());
  if (auto error = checkCuda(
          cudaMemsetAsync(rows, 0, elements * sizeof(float), device.stream),
          "dispatch"))
    return error;
  if (elements == 0)
    return llvm::Error::success();
  dispatchKernel<<<blocksFor(elements), kThreads, 0, device.stream>>>(
      in.data<float>(0), in.data<int32_t>(1),
      in.numOperands() == 3 ? in.data<float>(2) : nullptr, *size, rows);
  return checkCuda(cudaGetLastError(), "dispatch");
}

llvm::Error cuda::runCombine(const InstructionView &in, Device &device) {
  llvm::Expected<DispatchShape> size = dispatchShape(in);
  if (!size)
    return size.takeError();
  int64_t elements = size->groups * size->tokens * size->width;
  if (elements == 0)
    return llvm::Error::success();
  combineKernel<<<blocksFor(elements), kThreads, 0, device.stream>>>(
      in.data<float>(0), in.data<int32_t>(1),
      in.numOperands() == 3 ? in.data<float>(2) : nullptr, *size,
      in.data<float>(in.numOperands()));
  return checkCuda(cudaGetLastError(), "combine");
}

llvm::Error cuda::runCombineWeightsGrad(const InstructionView &in,
                                        Device &device) {
  llvm::Expected<DispatchShape> size = dispatchShape(in);
  if (!size)
    return size.takeError();
  int64_t slots = size->groups * size->rows();
  if (slots == 0)
    return llvm::Error::success();
  combineWeightsGradKernel<<<blocksFor(slots), kThreads, 0, device.stream>>>(
      in.data<float>(0), in.data<int32_t>(1), in.data<float>(2), *size,
      in.data<float>(3));
  return checkCuda(cudaGetLastError(), "combine_weights_grad");
}

/// Runs grouped_matmul or its weight's gradient: the counts brought to the
/// host and checked, then each expert's GEMM over its rows of each group.
static llvm::Error runGrouped(const InstructionView &in, Device &device,
                              bool weightGrad) {
  DType type = weightGrad ? F32 : in.floatType(0);
  llvm::Expected<shapes::GroupedMatmulDims> dims =
      groupedMatmulShape(in, weightGrad, type);
  if (!dims)
    return dims.takeError();
  std::vector<int32_t> counts(in.count(2));
  if (auto error =
          checkCuda(cudaMemcpyAsync(counts.data(), in.data<int32_t>(2),
                                    counts.size() * sizeof(int32_t),
                                    cudaMemcpyDeviceToHost, device.stream),
                    "cudaMemcpyAsync"))
    return error;
  if (auto error =
          checkCuda(cudaStreamSynchronize(device.stream), "the counts' copy"))
    return error;
  if (auto error = checkCounts(in, *dims, counts.data()))
    return error;
  bool transposed = in->grouped_matmul().transpose_rhs();
  int64_t bytes = bytesPerElement(type);
  char *out = in.data<char>(3);
  if (weightGrad)
    if (auto error = checkCuda(
            cudaMemsetAsync(out, 0, in.count(3) * bytes, device.stream),
            "cudaMemsetAsync"))
      return error;
  std::vector<RowMajorGemm> gemms;
  std::vector<int64_t> used = forEachExpert(
      *dims, counts.data(),
      [&](int64_t g, int64_t e, int64_t first, int64_t count) {
        gemms.push_back(expertGemm(*dims, transposed, weightGrad, g, e, first,
                                   count, in.data<void>(0), in.data<void>(1),
                                   out, bytes));
      });
  for (const RowMajorGemm &gemm : gemms)
    if (llvm::Error failed = cuda::gemm(device, gemm, type))
      return in.fail(llvm::toString(std::move(failed)));
  if (!weightGrad) // rows past the counts' sum are zero
    for (int64_t g = 0; g < dims->groups; ++g)
      if (int64_t left = dims->rows - used[g])
        if (auto error = checkCuda(
                cudaMemsetAsync(out + (g * dims->rows + used[g]) * dims->n *
                                          bytes,
                                0, left * dims->n * bytes, device.stream),
                "cudaMemsetAsync"))
          return error;
  return llvm::Error::success();
}

llvm::Error cuda::runGroupedMatmul(const InstructionView &in, Device &device) {
  return runGrouped(in, device, /*weightGrad=*/false);
}

llvm::Error cuda::runGroupedMatmulWeightGrad(const InstructionView &in,
                                             Device &device) {
  return runGrouped(in, device, /*weightGrad=*/true);
}

llvm::Error cuda::runExpertLoad(const InstructionView &in, Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 3, {F32, I32, I32, F32, F32, F32}))
    return error;
  int64_t experts = in.dim(0, 0);
  expertLoadKernel<<<int(experts), kThreads, 0, device.stream>>>(
      in.data<float>(0), in.data<int32_t>(1), in.data<int32_t>(2), in.count(2),
      experts, in.dim(1, 0), in.data<float>(3), in.data<float>(4),
      in.data<float>(5));
  return checkCuda(cudaGetLastError(), "expert_load");
}

llvm::Error cuda::runExpertLoadGrad(const InstructionView &in, Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}))
    return error;
  int64_t tokens = in.count(1);
  if (tokens == 0)
    return llvm::Error::success();
  expertLoadGradKernel<<<blocksFor(tokens), kThreads, 0, device.stream>>>(
      in.data<float>(0), in.data<int32_t>(1), in.data<float>(2), tokens,
      in.dim(0, 0), in.data<float>(3));
  return checkCuda(cudaGetLastError(), "expert_load_grad");
}

llvm::Error cuda::runLoadBalancingLoss(const InstructionView &in,
                                       Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, F32, F32, F32}))
    return error;
  loadBalancingLossKernel<<<1, 1, 0, device.stream>>>(
      in.data<float>(0), in.data<float>(1), in.data<float>(2), in.count(0),
      in.data<float>(3));
  return checkCuda(cudaGetLastError(), "load_balancing_loss");
}

llvm::Error cuda::runLoadBalancingLossGrad(const InstructionView &in,
                                           Device &device) {
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(3, 1, {F32, F32, F32, F32}))
    return error;
  int64_t experts = in.count(0);
  loadBalancingLossGradKernel<<<blocksFor(experts), kThreads, 0,
                                device.stream>>>(
      in.data<float>(0), in.data<float>(1), in.data<float>(2), experts,
      in.data<float>(3));
  return checkCuda(cudaGetLastError(), "load_balancing_loss_grad");
}
