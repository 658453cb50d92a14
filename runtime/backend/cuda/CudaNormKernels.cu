//===- CudaNormKernels.cu - rms_norm and its gradients --------------------===//
//
// One block per row; row statistics in double, as on the cpu.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

template <typename T>
__device__ double inverseRms(const T *row, int64_t dim, double eps) {
  double squares = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    squares += double(load(row[i])) * load(row[i]);
  return 1.0 / sqrt(blockSum(squares) / dim + eps);
}

template <typename T>
__global__ void rmsNormKernel(const T *x, const T *weight, T *out, int64_t dim,
                              double eps) {
  const T *in = x + blockIdx.x * dim;
  float inverse = float(inverseRms(in, dim, eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] =
        storeAs<T>(load(weight[i]) * (load(in[i]) * inverse));
}

template <typename T>
__global__ void rmsNormGradKernel(const T *x, const T *weight, const T *grad,
                                  T *out, int64_t dim, double eps) {
  const T *in = x + blockIdx.x * dim, *dy = grad + blockIdx.x * dim;
  double r = inverseRms(in, dim, eps);
  double dot = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    dot += double(load(weight[i])) * load(dy[i]) * load(in[i]);
  double correction = r * r * r * blockSum(dot) / dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] = storeAs<T>(
        float(r * load(weight[i]) * load(dy[i]) - correction * load(in[i])));
}

template <typename T>
__global__ void rowInverseRmsKernel(const T *x, int64_t dim, double eps,
                                    double *inverse) {
  double r = inverseRms(x + blockIdx.x * dim, dim, eps);
  if (threadIdx.x == 0)
    inverse[blockIdx.x] = r;
}

template <typename T>
__global__ void rmsNormWeightGradKernel(const T *x, const T *grad,
                                        const double *inverse, T *out,
                                        int64_t rows, int64_t dim) {
  GRID_STRIDE(i, dim) {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row)
      sum += double(load(grad[row * dim + i])) * load(x[row * dim + i]) *
             inverse[row];
    out[i] = storeAs<T>(float(sum));
  }
}

} // namespace

void rmsNorm(const void *x, const void *weight, void *out, int64_t rows,
             int64_t dim, double eps, bool bf16, cudaStream_t stream) {
  if (!rows)
    return;
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    rmsNormKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(weight),
        static_cast<T *>(out), dim, eps);
  });
}

void rmsNormGrad(const void *x, const void *weight, const void *grad, void *out,
                 int64_t rows, int64_t dim, double eps, bool bf16,
                 cudaStream_t stream) {
  if (!rows)
    return;
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    rmsNormGradKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(weight),
        static_cast<const T *>(grad), static_cast<T *>(out), dim, eps);
  });
}

void rmsNormWeightGrad(const void *x, const void *grad, void *out, int64_t rows,
                       int64_t dim, double eps, double *scratch, bool bf16,
                       cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    if (rows)
      rowInverseRmsKernel<<<rows, kThreads, 0, stream>>>(
          static_cast<const T *>(x), dim, eps, scratch);
    rmsNormWeightGradKernel<<<blocksFor(dim), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(grad), scratch,
        static_cast<T *>(out), rows, dim);
  });
}

} // namespace twill::cuda
