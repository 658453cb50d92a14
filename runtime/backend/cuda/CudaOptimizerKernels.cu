//===- CudaOptimizerKernels.cu - the optimizer step -----------------------===//
//
// Sums of squares, the scalar ops of clipping and the schedule, AdamW.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

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
  case 2: { // clip coefficient
    double norm = *static_cast<const float *>(a);
    *static_cast<float *>(out) = float(fmin(1.0, value / (norm + 1e-6)));
    break;
  }
  case 3: { // learning rate: warmup, then a half cosine
    int64_t step = *static_cast<const int64_t *>(a);
    int64_t total = *static_cast<const int64_t *>(b);
    int64_t warmup = integer;
    double lr;
    if (step < warmup) {
      lr = value * double(step) / double(warmup > 1 ? warmup : 1);
    } else {
      int64_t span = total - warmup > 1 ? total - warmup : 1;
      double progress = double(step - warmup) / double(span);
      lr = value * fmax(0.0, 0.5 * (1.0 + cos(M_PI * progress)));
    }
    *static_cast<float *>(out) = float(lr);
    break;
  }
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
  // The scalars as PyTorch computes them (in double), then its float ops.
  int64_t t = *step + 1;
  float decay = float(1.0 - double(*lr) * s.weightDecay);
  float stepSize = float(double(*lr) / (1.0 - pow(s.beta1, double(t))));
  float correction2Sqrt = float(sqrt(1.0 - pow(s.beta2, double(t))));
  float oneMinusBeta1 = float(1.0 - s.beta1);
  float beta2 = float(s.beta2), oneMinusBeta2 = float(1.0 - s.beta2);
  float eps = float(s.eps), scale = *gradScale;
  GRID_STRIDE(i, count) {
    float g = grad[i] * scale;
    float p = param[i] * decay;
    float m = expAvg[i] + oneMinusBeta1 * (g - expAvg[i]);
    float v = expAvgSq[i] * beta2 + oneMinusBeta2 * g * g;
    float denom = sqrtf(v) / correction2Sqrt + eps;
    newParam[i] = p - stepSize * (m / denom);
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
