//===- CudaKernels.cu - the cuda backend's kernels ------------------------===//
//
// Straightforward kernels first: grid-stride loops for elementwise work, one
// block per row for reductions (rms_norm, softmax statistics, attention's
// score rows; attention's products are cuBLAS GEMMs, CudaAttention.cpp).
// They mirror the cpu kernels' formulas so that the two backends can be
// compared op by op.
//
//===----------------------------------------------------------------------===//

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

template <typename T>
__global__ void fillKernel(T *out, int64_t count, float value) {
  GRID_STRIDE(i, count) out[i] = storeAs<T>(value);
}

template <typename T>
__global__ void castKernel(const void *in, CastSource from, T *out,
                           int64_t count) {
  GRID_STRIDE(i, count) {
    float value = 0;
    switch (from) {
    case CastSource::F32:
      value = static_cast<const float *>(in)[i];
      break;
    case CastSource::I32:
      value = float(static_cast<const int32_t *>(in)[i]);
      break;
    case CastSource::I64:
      value = float(static_cast<const int64_t *>(in)[i]);
      break;
    case CastSource::BF16:
      value = load(static_cast<const __nv_bfloat16 *>(in)[i]);
      break;
    }
    out[i] = storeAs<T>(value);
  }
}

template <typename T>
__global__ void embeddingKernel(const T *table, int64_t rows, int64_t dim,
                                const int32_t *ids, int64_t count, T *out,
                                int64_t firstRow, bool wholeTable,
                                int *errors) {
  GRID_STRIDE(i, count * dim) {
    int64_t position = i / dim, column = i % dim;
    int64_t row = int64_t(ids[position]) - firstRow;
    bool inside = row >= 0 && row < rows;
    if (!inside && wholeTable && column == 0)
      atomicOr(errors, kTokenOutsideVocab);
    out[i] = inside ? table[row * dim + column] : storeAs<T>(0.0f);
  }
}

__global__ void embeddingGradKernel(const int32_t *ids, int64_t count,
                                    const float *grad, int64_t rows,
                                    int64_t dim, float *out, int *errors) {
  GRID_STRIDE(i, count * dim) {
    int64_t position = i / dim, column = i % dim;
    int64_t row = ids[position];
    if (row < 0 || row >= rows) {
      if (column == 0)
        atomicOr(errors, kTokenOutsideVocab);
      continue;
    }
    atomicAdd(out + row * dim + column, grad[i]);
  }
}

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

/// One block per row of scores (ChunkedAttention.h): P = softmax over the
/// visible keys of the scaled scores, and the row's log-sum-exp.
template <typename T> __global__ void softmaxRowsKernel(SoftmaxRows s) {
  int64_t row = blockIdx.x, query = s.firstQuery + row % s.rows;
  const float *scores = s.scores + row * s.keys;
  T *p = static_cast<T *>(s.probabilities) + row * s.keys;
  double best = -INFINITY;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    if (s.visible(query, j))
      best = fmax(best, double(scores[j]) * s.scale);
  best = blockMax(best);
  double total = 0;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    if (s.visible(query, j))
      total += exp(double(scores[j]) * s.scale - best);
  double lse = best + log(blockSum(total));
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    p[j] = storeAs<T>(s.visible(query, j)
                          ? float(exp(double(scores[j]) * s.scale - lse))
                          : 0.0f);
  if (threadIdx.x == 0)
    s.lse[row] = float(lse);
}

/// One block per row: dS = P (dP - sum_j P_j dP_j) scale, P recomputed
/// from the scores and the row's log-sum-exp.
template <typename T> __global__ void softmaxGradRowsKernel(SoftmaxRows s) {
  int64_t row = blockIdx.x, query = s.firstQuery + row % s.rows;
  const float *scores = s.scores + row * s.keys;
  const float *dP = s.probabilityGrad + row * s.keys;
  T *dS = static_cast<T *>(s.scoreGrad) + row * s.keys;
  double lse = s.lse[row];
  auto probability = [&](int64_t j) {
    return s.visible(query, j) ? exp(double(scores[j]) * s.scale - lse) : 0.0;
  };
  double rowDot = 0;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    rowDot += probability(j) * dP[j];
  rowDot = blockSum(rowDot);
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    dS[j] = storeAs<T>(float(probability(j) * (dP[j] - rowDot) * s.scale));
}

template <typename T>
__global__ void binaryKernel(Binary op, const T *lhs, const T *rhs, T *out,
                             int64_t count) {
  GRID_STRIDE(i, count) {
    float a = load(lhs[i]), b = load(rhs[i]), value = 0;
    switch (op) {
    case Binary::Add:
      value = a + b;
      break;
    case Binary::Mul:
      value = a * b;
      break;
    case Binary::Div:
      value = a / b;
      break;
    case Binary::Swiglu:
      value = a / (1.0f + expf(-a)) * b;
      break;
    }
    out[i] = storeAs<T>(value);
  }
}

template <typename T>
__global__ void scaleKernel(const T *x, float factor, T *out, int64_t count) {
  GRID_STRIDE(i, count) out[i] = storeAs<T>(load(x[i]) * factor);
}

template <typename T>
__global__ void swigluGradKernel(const T *gateIn, const T *upIn,
                                 const T *gradIn, T *gateGrad, T *upGrad,
                                 int64_t count) {
  GRID_STRIDE(i, count) {
    float gate = load(gateIn[i]), up = load(upIn[i]), grad = load(gradIn[i]);
    float sigmoid = 1.0f / (1.0f + expf(-gate));
    float silu = gate * sigmoid;
    upGrad[i] = storeAs<T>(grad * silu);
    gateGrad[i] =
        storeAs<T>(grad * up * sigmoid * (1.0f + gate * (1.0f - sigmoid)));
  }
}

/// The columns of a row that hold logits (not padding).
__device__ int64_t validColumns(VocabBlock vocab) {
  int64_t valid = vocab.vocab - vocab.first;
  return valid < 0 ? 0 : (valid > vocab.columns ? vocab.columns : valid);
}

template <typename T>
__global__ void
softmaxMaxAndTargetKernel(const T *logits, const int32_t *labels,
                          VocabBlock vocab, int64_t ignoreIndex, double *max,
                          double *target, int *errors) {
  int64_t row = blockIdx.x, columns = validColumns(vocab);
  const T *z = logits + row * vocab.columns;
  double best = -INFINITY;
  for (int64_t i = threadIdx.x; i < columns; i += blockDim.x)
    best = fmax(best, double(load(z[i])));
  best = blockMax(best);
  if (threadIdx.x == 0) {
    int64_t label = labels[row];
    if (label != ignoreIndex && (label < 0 || label >= vocab.vocab))
      atomicOr(errors, kLabelOutsideVocab);
    int64_t local = label - vocab.first;
    max[row] = best;
    target[row] = label != ignoreIndex && local >= 0 && local < columns
                      ? double(load(z[local]))
                      : 0.0;
  }
}

template <typename T>
__global__ void softmaxSumKernel(const T *logits, VocabBlock vocab,
                                 const double *max, double *sum) {
  int64_t row = blockIdx.x, columns = validColumns(vocab);
  const T *z = logits + row * vocab.columns;
  double total = 0;
  for (int64_t i = threadIdx.x; i < columns; i += blockDim.x)
    total += exp(double(load(z[i])) - max[row]);
  total = blockSum(total);
  if (threadIdx.x == 0)
    sum[row] = total;
}

__global__ void crossEntropyLossKernel(const int32_t *labels, int64_t rows,
                                       int64_t ignoreIndex, const double *max,
                                       const double *sum, const double *target,
                                       float *loss, int64_t *count) {
  double total = 0, counted = 0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x)
    if (labels[row] != ignoreIndex) {
      total += log(sum[row]) + max[row] - target[row];
      counted += 1;
    }
  total = blockSum(total);
  counted = blockSum(counted);
  if (threadIdx.x == 0) {
    *loss = float(total);
    *count = int64_t(counted);
  }
}

template <typename T>
__global__ void
crossEntropyGradKernel(const T *logits, const int32_t *labels, int64_t rows,
                       VocabBlock vocab, int64_t ignoreIndex, const double *max,
                       const double *sum, const float *lossGrad, T *out) {
  int64_t columns = validColumns(vocab);
  GRID_STRIDE(i, rows * vocab.columns) {
    int64_t row = i / vocab.columns, column = i % vocab.columns;
    int64_t label = labels[row];
    float value = 0.0f;
    if (label != ignoreIndex && column < columns) {
      value =
          float(exp(double(load(logits[i])) - max[row]) / sum[row] * *lossGrad);
      if (column == label - vocab.first)
        value -= *lossGrad;
    }
    out[i] = storeAs<T>(value);
  }
}

struct Permutation {
  int64_t shape[8], permutation[8];
  int rank;
};

template <typename T>
__global__ void transposeKernel(const T *x, Permutation p, T *out,
                                int64_t count) {
  GRID_STRIDE(i, count) {
    // Output index -> input index: output dim d is input dim permutation[d].
    int64_t remaining = i, source = 0, stride[8];
    int64_t running = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
      stride[d] = running;
      running *= p.shape[d];
    }
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t size = p.shape[p.permutation[d]];
      source += (remaining % size) * stride[p.permutation[d]];
      remaining /= size;
    }
    out[i] = x[source];
  }
}

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
  case 1:
    *static_cast<float *>(out) = sqrtf(*static_cast<const float *>(a));
    break;
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

__global__ void copyAlongDimKernel(const char *from, int64_t fromSize,
                                   int64_t first, char *to, int64_t toSize,
                                   int64_t length, int64_t outer,
                                   int64_t sliceBytes) {
  GRID_STRIDE(i, outer * toSize * sliceBytes) {
    int64_t byte = i % sliceBytes, slice = (i / sliceBytes) % toSize;
    int64_t o = i / (sliceBytes * toSize);
    to[i] = slice < length
                ? from[(o * fromSize + first + slice) * sliceBytes + byte]
                : 0;
  }
}

template <typename T>
__global__ void arrangeBlocksKernel(const T *from, T *to, int64_t ranks,
                                    int64_t outer, int64_t block, int64_t whole,
                                    int64_t inner, bool toWhole) {
  GRID_STRIDE(i, ranks * outer * block * inner) {
    // i indexes the blocked layout [ranks][outer][block][inner].
    int64_t e = i % inner, r = (i / inner) % block;
    int64_t o = (i / (inner * block)) % outer, c = i / (inner * block * outer);
    int64_t position = c * block + r;
    int64_t wholeIndex = (o * whole + position) * inner + e;
    if (toWhole) {
      if (position < whole)
        to[wholeIndex] = from[i];
    } else {
      to[i] = position < whole ? from[wholeIndex] : storeAs<T>(0.0f);
    }
  }
}

} // namespace

void fill(void *out, int64_t count, float value, bool bf16,
          cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    fillKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<STORED(tag) *>(out), count, value);
  });
}

void cast(const void *in, CastSource from, void *out, bool toBF16,
          int64_t count, cudaStream_t stream) {
  stored(toBF16, [&](auto *tag) {
    castKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        in, from, static_cast<STORED(tag) *>(out), count);
  });
}

void embedding(const void *table, int64_t rows, int64_t dim, const int32_t *ids,
               int64_t count, void *out, int64_t firstRow, bool wholeTable,
               int *errors, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    embeddingKernel<<<blocksFor(count * dim), kThreads, 0, stream>>>(
        static_cast<const T *>(table), rows, dim, ids, count,
        static_cast<T *>(out), firstRow, wholeTable, errors);
  });
}

void embeddingGrad(const int32_t *ids, int64_t count, const float *grad,
                   int64_t rows, int64_t dim, float *out, int *errors,
                   cudaStream_t stream) {
  cudaMemsetAsync(out, 0, rows * dim * sizeof(float), stream);
  embeddingGradKernel<<<blocksFor(count * dim), kThreads, 0, stream>>>(
      ids, count, grad, rows, dim, out, errors);
}

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

void softmaxRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream) {
  if (rows.heads * rows.rows)
    stored(bf16, [&](auto *tag) {
      softmaxRowsKernel<STORED(tag)>
          <<<rows.heads * rows.rows, kThreads, 0, stream>>>(rows);
    });
}

void softmaxGradRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream) {
  if (rows.heads * rows.rows)
    stored(bf16, [&](auto *tag) {
      softmaxGradRowsKernel<STORED(tag)>
          <<<rows.heads * rows.rows, kThreads, 0, stream>>>(rows);
    });
}

void binary(Binary op, const void *lhs, const void *rhs, void *out,
            int64_t count, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    binaryKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        op, static_cast<const T *>(lhs), static_cast<const T *>(rhs),
        static_cast<T *>(out), count);
  });
}

void scale(const void *x, double factor, void *out, int64_t count, bool bf16,
           cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    scaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), float(factor), static_cast<T *>(out), count);
  });
}

void swigluGrad(const void *gate, const void *up, const void *grad,
                void *gateGrad, void *upGrad, int64_t count, bool bf16,
                cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    swigluGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(gate), static_cast<const T *>(up),
        static_cast<const T *>(grad), static_cast<T *>(gateGrad),
        static_cast<T *>(upGrad), count);
  });
}

void softmaxMaxAndTarget(const void *logits, const int32_t *labels,
                         int64_t rows, VocabBlock vocab, int64_t ignoreIndex,
                         double *max, double *target, int *errors, bool bf16,
                         cudaStream_t stream) {
  if (!rows)
    return;
  stored(bf16, [&](auto *tag) {
    softmaxMaxAndTargetKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const STORED(tag) *>(logits), labels, vocab, ignoreIndex,
        max, target, errors);
  });
}

void softmaxSum(const void *logits, int64_t rows, VocabBlock vocab,
                const double *max, double *sum, bool bf16,
                cudaStream_t stream) {
  if (!rows)
    return;
  stored(bf16, [&](auto *tag) {
    softmaxSumKernel<<<rows, kThreads, 0, stream>>>(
        static_cast<const STORED(tag) *>(logits), vocab, max, sum);
  });
}

void crossEntropyLoss(const int32_t *labels, int64_t rows, int64_t ignoreIndex,
                      const double *max, const double *sum,
                      const double *target, float *loss, int64_t *count,
                      cudaStream_t stream) {
  crossEntropyLossKernel<<<1, kThreads, 0, stream>>>(
      labels, rows, ignoreIndex, max, sum, target, loss, count);
}

void crossEntropyGrad(const void *logits, const int32_t *labels, int64_t rows,
                      VocabBlock vocab, int64_t ignoreIndex, const double *max,
                      const double *sum, const float *lossGrad, void *out,
                      bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    crossEntropyGradKernel<<<blocksFor(rows * vocab.columns), kThreads, 0,
                             stream>>>(static_cast<const T *>(logits), labels,
                                       rows, vocab, ignoreIndex, max, sum,
                                       lossGrad, static_cast<T *>(out));
  });
}

void transpose(const void *x, const int64_t *shape, const int64_t *permutation,
               int rank, void *out, bool bf16, cudaStream_t stream) {
  Permutation p{};
  p.rank = rank;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    p.shape[d] = shape[d];
    p.permutation[d] = permutation[d];
    count *= shape[d];
  }
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    transposeKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), p, static_cast<T *>(out), count);
  });
}

void accumulateSquares(const float *x, int64_t count, double *accumulator,
                       cudaStream_t stream) {
  squaresKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, count,
                                                           accumulator);
}

void finishSquares(const double *accumulator, bool root, float *out,
                   cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(0, accumulator, nullptr, 0, root, out);
}

void sqrtScalar(const float *in, float *out, cudaStream_t stream) {
  scalarKernel<<<1, 1, 0, stream>>>(1, in, nullptr, 0, 0, out);
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

void adamw(const float *param, const float *grad, const float *expAvg,
           const float *expAvgSq, const float *lr, const float *gradScale,
           const int64_t *step, AdamWSettings settings, float *newParam,
           float *newExpAvg, float *newExpAvgSq, int64_t count,
           cudaStream_t stream) {
  adamwKernel<<<blocksFor(count), kThreads, 0, stream>>>(
      param, grad, expAvg, expAvgSq, lr, gradScale, step, settings, newParam,
      newExpAvg, newExpAvgSq, count);
}

void copyAlongDim(const void *from, int64_t fromSize, int64_t first, void *to,
                  int64_t toSize, int64_t length, int64_t outer,
                  int64_t sliceBytes, cudaStream_t stream) {
  copyAlongDimKernel<<<blocksFor(outer * toSize * sliceBytes), kThreads, 0,
                       stream>>>(static_cast<const char *>(from), fromSize,
                                 first, static_cast<char *>(to), toSize, length,
                                 outer, sliceBytes);
}

void arrangeBlocks(const void *from, void *to, int64_t ranks, int64_t outer,
                   int64_t block, int64_t whole, int64_t inner, bool toWhole,
                   bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    arrangeBlocksKernel<<<blocksFor(ranks * outer * block * inner), kThreads, 0,
                          stream>>>(static_cast<const T *>(from),
                                    static_cast<T *>(to), ranks, outer, block,
                                    whole, inner, toWhole);
  });
}

} // namespace twill::cuda
