//===- CudaRopeKernels.cu - the rotary embedding --------------------------===//
//
// Each pair (i, i + headDim / 2) rotated by its position times its
// frequency, from a table the host makes in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

template <typename T>
__global__ void ropeKernel(const T *x, const int32_t *positions, T *out,
                           int64_t tokens, int64_t heads, int64_t headDim,
                           const double *frequencies, bool inverse) {
  int64_t half = headDim / 2;
  GRID_STRIDE(i, tokens * heads * half) {
    int64_t pair = i % half, token = i / (heads * half);
    int64_t base = (i / half) * headDim;
    double angle = double(positions[token]) * frequencies[pair];
    float cosine = float(cos(angle));
    float sine = float(inverse ? -sin(angle) : sin(angle));
    float first = load(x[base + pair]), second = load(x[base + pair + half]);
    out[base + pair] = storeAs<T>(first * cosine - second * sine);
    out[base + pair + half] = storeAs<T>(second * cosine + first * sine);
  }
}

} // namespace

void rope(const void *x, const int32_t *positions, void *out, int64_t tokens,
          int64_t heads, int64_t headDim, const double *frequencies,
          bool inverse, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    ropeKernel<<<blocksFor(tokens * heads * (headDim / 2)), kThreads, 0,
                 stream>>>(static_cast<const T *>(x), positions,
                           static_cast<T *>(out), tokens, heads, headDim,
                           frequencies, inverse);
  });
}

} // namespace twill::cuda
