//===- CudaKernelSupport.cuh - what the cuda kernels share ------*- CUDA -*-===//
//
// Grid-stride loops for elementwise work, one block per row for reductions;
// values stored as T (float or bf16) and computed in fp32. Included by each
// Cuda*Kernels.cu; everything here is local to the file that includes it.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELSUPPORT_CUH
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELSUPPORT_CUH

#include "runtime/backend/cuda/CudaKernels.h"

#include <cmath>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <type_traits>

namespace twill::cuda {
namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t count) {
  int64_t blocks = (count + kThreads - 1) / kThreads;
  return int(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

#define GRID_STRIDE(i, count)                                                  \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;             \
       i < (count); i += int64_t(gridDim.x) * blockDim.x)

/// Values are stored as T (float or bf16) and computed in fp32.
__device__ float load(float value) { return value; }
__device__ float load(__nv_bfloat16 value) { return __bfloat162float(value); }
template <typename T> __device__ T storeAs(float value);
template <> __device__ float storeAs<float>(float value) { return value; }
template <> __device__ __nv_bfloat16 storeAs<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

/// Calls `launch` with a null pointer of the storage type, bf16 or fp32:
/// launchers cast their untyped pointers to it.
template <typename Launch> void stored(bool bf16, Launch launch) {
  if (bf16)
    launch(static_cast<__nv_bfloat16 *>(nullptr));
  else
    launch(static_cast<float *>(nullptr));
}
#define STORED(tag) std::remove_pointer_t<decltype(tag)>

/// Sum of `value` over the block; every thread gets it.
__device__ double blockSum(double value) {
  __shared__ double partial[32];
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xffffffff, value, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < (blockDim.x + 31) / 32; ++w)
    total += partial[w];
  return total;
}

/// Maximum of `value` over the block; every thread gets it.
__device__ double blockMax(double value) {
  __shared__ double partial[32];
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmax(value, __shfl_down_sync(0xffffffff, value, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  double best = -INFINITY;
  for (int w = 0; w < (blockDim.x + 31) / 32; ++w)
    best = fmax(best, partial[w]);
  return best;
}

} // namespace
} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELSUPPORT_CUH
