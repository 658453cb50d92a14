//===- CudaOptimizerKernels.cu - the optimizer step -----------------------===//
//
// Sums of squares, the scalar ops of clipping and the schedule, AdamW.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"
#include "support/ElementMath.h"

namespace twill::cuda {
namespace {

__global__ void squaresKernel(const float *x, int64_t count,
                              double *accumulator) {
  double sum = 0;
  GRID_STRIDE(i, count) sum += double(x[i]) * x[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0)
    atomicAdd(accumulator, sum);
}

__global__ void scalarKernel(int op, const void *a, const void *b, double value,
                             int64_t integer, void *out) {
  switch (op) {
  case 0: { // finish squares: sqrt or not
    double squares = *static_cast<const double *>(a);
    *static_cast<float *>(out) = float(integer ? sqrt(squares) : squares);
    break;
  }
  case 2: // clip coefficient
    *static_cast<float *>(out) =
        math::clipCoefficient(*static_cast<const float *>(a), value);
    break;
  case 3: // learning rate: warmup, then a half cosine
    *static_cast<float *>(out) =
        math::scheduledLr(*static_cast<const int64_t *>(a),
                          *static_cast<const int64_t *>(b), value, integer);
    break;
  case 4:
    *static_cast<int64_t *>(out) = *static_cast<const int64_t *>(a) + 1;
    break;
  }
}

__global__ void addCountsKernel(const int64_t *a, const int64_t *b,
                                int64_t *out, int64_t count) {
  GRID_STRIDE(i, count)
  out[i] = a[i] + b[i];
}

__global__ void adamwKernel(const float *param, const float *grad,
                            const float *expAvg, const float *expAvgSq,
                            const float *lr, const float *gradScale,
                            const int64_t *step, AdamWSettings s,
                            float *newParam, float *newExpAvg,
                            float *newExpAvgSq, int64_t count) {
  math::AdamWStep scalars =
      math::adamwStep(*lr, *step, s.beta1, s.beta2, s.eps, s.weightDecay);
  float scale = *gradScale;
  GRID_STRIDE(i, count) {
    float p = param[i], m = expAvg[i], v = expAvgSq[i];
    math::adamwUpdate(scalars, grad[i] * scale, p, m, v);
    newParam[i] = p;
    newExpAvg[i] = m;
    newExpAvgSq[i] = v;
  }
}

} // namespace

void accumulateSquares(const float *x, int64_t count, double *accumulator,
                       cudaStream_t stream) {
  squaresKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, count,
                                                           accumulator);
}

void finishSquares(const double *accumulator, bool root, float *out,
                   cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(0, accumulator, nullptr, 0, root, out);
}

void clipCoefficient(const float *norm, double maxNorm, float *out,
                     cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(2, norm, nullptr, maxNorm, 0, out);
}

void scheduledLr(const int64_t *step, const int64_t *totalSteps, double lr,
                 int64_t warmupSteps, float *out, cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(3, step, totalSteps, lr, warmupSteps, out);
}

void increment(const int64_t *in, int64_t *out, cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(4, in, nullptr, 0, 0, out);
}

void addCounts(const int64_t *a, const int64_t *b, int64_t *out, int64_t count,
               cudaStream_t stream) {
  addCountsKernel<<<blocksFor(count), kThreads, 0, stream>>>(a, b, out, count);
}

void adamw(const float *param, const float *grad, const float *expAvg,
           const float *expAvgSq, const float *lr, const float *gradScale,
           const int64_t *step, AdamWSettings settings, float *newParam,
           float *newExpAvg, float *newExpAvgSq, int64_t count,
           cudaStream_t stream) {
  adamwKernel<<<blocksFor(count), kThreads, 0, stream>>>(
      param, grad, expAvg, expAvgSq, lr, gradScale, step, settings, newParam,
      newExpAvg, newExpAvgSq, count);
}

} // namespace twill::cuda
