//===- CudaKernels.cu - the cuda backend's kernels ------------------------===//
//
// Straightforward kernels first: grid-stride loops for elementwise work, one
// block per row for reductions (rms_norm, softmax statistics), one block per
// query row for attention (scores in shared memory; the key/value gradients
// accumulated with atomics). They mirror the cpu kernels' formulas so that
// the two backends can be compared op by op.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernels.h"

#include <cmath>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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

__global__ void fillKernel(float *out, int64_t count, float value) {
  GRID_STRIDE(i, count) out[i] = value;
}

__global__ void castKernel(const void *in, CastSource from, float *out,
                           int64_t count) {
  GRID_STRIDE(i, count) {
    switch (from) {
    case CastSource::F32:
      out[i] = static_cast<const float *>(in)[i];
      break;
    case CastSource::I32:
      out[i] = float(static_cast<const int32_t *>(in)[i]);
      break;
    case CastSource::I64:
      out[i] = float(static_cast<const int64_t *>(in)[i]);
      break;
    case CastSource::BF16:
      out[i] = __bfloat162float(static_cast<const __nv_bfloat16 *>(in)[i]);
      break;
    }
  }
}

__global__ void narrowToBF16Kernel(const float *in, __nv_bfloat16 *out,
                                   int64_t count) {
  GRID_STRIDE(i, count) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void embeddingKernel(const float *table, int64_t rows, int64_t dim,
                                const int32_t *ids, int64_t count, float *out,
                                int64_t firstRow, bool wholeTable,
                                int *errors) {
  GRID_STRIDE(i, count * dim) {
    int64_t position = i / dim, column = i % dim;
    int64_t row = int64_t(ids[position]) - firstRow;
    bool inside = row >= 0 && row < rows;
    if (!inside && wholeTable && column == 0)
      atomicOr(errors, kTokenOutsideVocab);
    out[i] = inside ? table[row * dim + column] : 0.0f;
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

__device__ double inverseRms(const float *row, int64_t dim, double eps) {
  double squares = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    squares += double(row[i]) * row[i];
  return 1.0 / sqrt(blockSum(squares) / dim + eps);
}

__global__ void rmsNormKernel(const float *x, const float *weight, float *out,
                              int64_t dim, double eps) {
  const float *in = x + blockIdx.x * dim;
  float inverse = float(inverseRms(in, dim, eps));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] = weight[i] * (in[i] * inverse);
}

__global__ void rmsNormGradKernel(const float *x, const float *weight,
                                  const float *grad, float *out, int64_t dim,
                                  double eps) {
  const float *in = x + blockIdx.x * dim, *dy = grad + blockIdx.x * dim;
  double r = inverseRms(in, dim, eps);
  double dot = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    dot += double(weight[i]) * dy[i] * in[i];
  double correction = r * r * r * blockSum(dot) / dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[blockIdx.x * dim + i] = float(r * weight[i] * dy[i] - correction * in[i]);
}

__global__ void rowInverseRmsKernel(const float *x, int64_t dim, double eps,
                                    float *inverse) {
  double r = inverseRms(x + blockIdx.x * dim, dim, eps);
  if (threadIdx.x == 0)
    inverse[blockIdx.x] = float(r);
}

__global__ void rmsNormWeightGradKernel(const float *x, const float *grad,
                                        const float *inverse, float *out,
                                        int64_t rows, int64_t dim) {
  GRID_STRIDE(i, dim) {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row)
      sum += double(grad[row * dim + i]) * x[row * dim + i] * inverse[row];
    out[i] = float(sum);
  }
}

__global__ void ropeKernel(const float *x, const int32_t *positions,
                           float *out, int64_t tokens, int64_t heads,
                           int64_t headDim, const double *frequencies,
                           bool inverse) {
  int64_t half = headDim / 2;
  GRID_STRIDE(i, tokens * heads * half) {
    int64_t pair = i % half, token = i / (heads * half);
    int64_t base = (i / half) * headDim;
    double angle = double(positions[token]) * frequencies[pair];
    float cosine = float(cos(angle));
    float sine = float(inverse ? -sin(angle) : sin(angle));
    float first = x[base + pair], second = x[base + pair + half];
    out[base + pair] = first * cosine - second * sine;
    out[base + pair + half] = second * cosine + first * sine;
  }
}

/// The softmax weights of query row `i` over keys 0..i (0 across segments),
/// into `weights` (shared memory); every thread of the block takes part.
__device__ void attentionWeights(const float *query, const float *k,
                                 const int32_t *segments, int64_t b, int64_t i,
                                 int64_t seq, int64_t kvHeads, int64_t kvHead,
                                 int64_t headDim, double scale,
                                 float *weights) {
  double best = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    bool visible =
        !segments || segments[b * seq + j] == segments[b * seq + i];
    float score = -INFINITY;
    if (visible) {
      const float *key = k + ((b * seq + j) * kvHeads + kvHead) * headDim;
      float dot = 0;
      for (int64_t d = 0; d < headDim; ++d)
        dot += query[d] * key[d];
      score = float(dot * scale);
      best = fmax(best, double(score));
    }
    weights[j] = score;
  }
  best = blockMax(best);
  double total = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    float w = weights[j] == -INFINITY ? 0.0f : float(exp(weights[j] - best));
    weights[j] = w;
    total += w;
  }
  total = blockSum(total);
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x)
    weights[j] = float(weights[j] / total);
  __syncthreads();
}

/// One block per (batch row, query head, query position).
__global__ void attentionKernel(const float *q, const float *k, const float *v,
                                const int32_t *segments, float *out,
                                int64_t seq, HeadBlock heads, int64_t kvHeads,
                                int64_t headDim, double scale) {
  extern __shared__ float weights[];
  int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  int64_t kvHead = (heads.first + h) / (heads.total / kvHeads);
  const float *query = q + ((b * seq + i) * heads.count + h) * headDim;
  attentionWeights(query, k, segments, b, i, seq, kvHeads, kvHead, headDim,
                   scale, weights);
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x) {
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j)
      if (weights[j] != 0.0f)
        sum += double(weights[j]) *
               v[((b * seq + j) * kvHeads + kvHead) * headDim + d];
    out[((b * seq + i) * heads.count + h) * headDim + d] = float(sum);
  }
}

__global__ void attentionGradKernel(const float *q, const float *k,
                                    const float *v, const float *output,
                                    const float *grad, const int32_t *segments,
                                    float *queryGrad, float *keyGrad,
                                    float *valueGrad, int64_t seq, HeadBlock heads,
                                    int64_t kvHeads, int64_t headDim,
                                    double scale) {
  extern __shared__ float weights[];
  int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  int64_t kvHead = (heads.first + h) / (heads.total / kvHeads);
  int64_t row = (b * seq + i) * heads.count + h;
  const float *query = q + row * headDim, *dOut = grad + row * headDim;
  const float *out = output + row * headDim;
  attentionWeights(query, k, segments, b, i, seq, kvHeads, kvHead, headDim,
                   scale, weights);
  double rowDot = 0; // dO . O
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x)
    rowDot += double(dOut[d]) * out[d];
  rowDot = blockSum(rowDot);
  // dScore_j = p_j (dO . v_j - dO . O) scale, in place of p_j.
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    float p = weights[j];
    if (p == 0.0f)
      continue;
    const float *value = v + ((b * seq + j) * kvHeads + kvHead) * headDim;
    double dP = 0;
    for (int64_t d = 0; d < headDim; ++d)
      dP += double(dOut[d]) * value[d];
    float *dv = valueGrad + ((b * seq + j) * kvHeads + kvHead) * headDim;
    for (int64_t d = 0; d < headDim; ++d)
      atomicAdd(dv + d, p * dOut[d]);
    weights[j] = float(p * (dP - rowDot) * scale);
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x) {
    double dq = 0;
    for (int64_t j = 0; j <= i; ++j) {
      float dScore = weights[j];
      if (dScore == 0.0f)
        continue;
      int64_t kv = ((b * seq + j) * kvHeads + kvHead) * headDim + d;
      dq += double(dScore) * k[kv];
      atomicAdd(keyGrad + kv, dScore * query[d]);
    }
    queryGrad[row * headDim + d] = float(dq);
  }
}

__global__ void binaryKernel(Binary op, const float *lhs, const float *rhs,
                             float *out, int64_t count) {
  GRID_STRIDE(i, count) {
    float a = lhs[i], b = rhs[i];
    switch (op) {
    case Binary::Add:
      out[i] = a + b;
      break;
    case Binary::Mul:
      out[i] = a * b;
      break;
    case Binary::Div:
      out[i] = a / b;
      break;
    case Binary::Swiglu:
      out[i] = a / (1.0f + expf(-a)) * b;
      break;
    }
  }
}

__global__ void scaleKernel(const float *x, float factor, float *out,
                            int64_t count) {
  GRID_STRIDE(i, count) out[i] = x[i] * factor;
}

__global__ void swigluGradKernel(const float *gate, const float *up,
                                 const float *grad, float *gateGrad,
                                 float *upGrad, int64_t count) {
  GRID_STRIDE(i, count) {
    float sigmoid = 1.0f / (1.0f + expf(-gate[i]));
    float silu = gate[i] * sigmoid;
    upGrad[i] = grad[i] * silu;
    gateGrad[i] =
        grad[i] * up[i] * sigmoid * (1.0f + gate[i] * (1.0f - sigmoid));
  }
}

/// The columns of a row that hold logits (not padding).
__device__ int64_t validColumns(VocabBlock vocab) {
  int64_t valid = vocab.vocab - vocab.first;
  return valid < 0 ? 0 : (valid > vocab.columns ? vocab.columns : valid);
}

__global__ void softmaxMaxAndTargetKernel(const float *logits,
                                          const int32_t *labels, VocabBlock vocab,
                                          int64_t ignoreIndex, double *max,
                                          double *target, int *errors) {
  int64_t row = blockIdx.x, columns = validColumns(vocab);
  const float *z = logits + row * vocab.columns;
  double best = -INFINITY;
  for (int64_t i = threadIdx.x; i < columns; i += blockDim.x)
    best = fmax(best, double(z[i]));
  best = blockMax(best);
  if (threadIdx.x == 0) {
    int64_t label = labels[row];
    if (label != ignoreIndex && (label < 0 || label >= vocab.vocab))
      atomicOr(errors, kLabelOutsideVocab);
    int64_t local = label - vocab.first;
    max[row] = best;
    target[row] = label != ignoreIndex && local >= 0 && local < columns
                      ? double(z[local])
                      : 0.0;
  }
}

__global__ void softmaxSumKernel(const float *logits, VocabBlock vocab,
                                 const double *max, double *sum) {
  int64_t row = blockIdx.x, columns = validColumns(vocab);
  const float *z = logits + row * vocab.columns;
  double total = 0;
  for (int64_t i = threadIdx.x; i < columns; i += blockDim.x)
    total += exp(double(z[i]) - max[row]);
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

__global__ void crossEntropyGradKernel(const float *logits,
                                       const int32_t *labels, int64_t rows,
                                       VocabBlock vocab, int64_t ignoreIndex,
                                       const double *max, const double *sum,
                                       const float *lossGrad, float *out) {
  int64_t columns = validColumns(vocab);
  GRID_STRIDE(i, rows * vocab.columns) {
    int64_t row = i / vocab.columns, column = i % vocab.columns;
    int64_t label = labels[row];
    float value = 0.0f;
    if (label != ignoreIndex && column < columns) {
      value = float(exp(double(logits[i]) - max[row]) / sum[row] * *lossGrad);
      if (column == label - vocab.first)
        value -= *lossGrad;
    }
    out[i] = value;
  }
}

struct Permutation {
  int64_t shape[8], permutation[8];
  int rank;
};

__global__ void transposeKernel(const float *x, Permutation p, float *out,
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

__global__ void scalarKernel(int op, const void *a, const void *b,
                             double value, int64_t integer, void *out) {
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
                            const int64_t *step, AdamWSettings s, float *newParam,
                            float *newExpAvg, float *newExpAvgSq,
                            int64_t count) {
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

__global__ void arrangeBlocksKernel(const float *from, float *to,
                                    int64_t ranks, int64_t outer,
                                    int64_t block, int64_t whole,
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
      to[i] = position < whole ? from[wholeIndex] : 0.0f;
    }
  }
}

} // namespace

void fill(float *out, int64_t count, float value, cudaStream_t stream) {
  fillKernel<<<blocksFor(count), kThreads, 0, stream>>>(out, count, value);
}

void narrowToBF16(const float *in, void *out, int64_t count,
                  cudaStream_t stream) {
  narrowToBF16Kernel<<<blocksFor(count), kThreads, 0, stream>>>(
      in, static_cast<__nv_bfloat16 *>(out), count);
}

void castToFloat(const void *in, CastSource from, float *out, int64_t count,
                 cudaStream_t stream) {
  castKernel<<<blocksFor(count), kThreads, 0, stream>>>(in, from, out, count);
}

void embedding(const float *table, int64_t rows, int64_t dim,
               const int32_t *ids, int64_t count, float *out, int64_t firstRow,
               bool wholeTable, int *errors, cudaStream_t stream) {
  embeddingKernel<<<blocksFor(count * dim), kThreads, 0, stream>>>(
      table, rows, dim, ids, count, out, firstRow, wholeTable, errors);
}

void embeddingGrad(const int32_t *ids, int64_t count, const float *grad,
                   int64_t rows, int64_t dim, float *out, int *errors,
                   cudaStream_t stream) {
  cudaMemsetAsync(out, 0, rows * dim * sizeof(float), stream);
  embeddingGradKernel<<<blocksFor(count * dim), kThreads, 0, stream>>>(
      ids, count, grad, rows, dim, out, errors);
}

void rmsNorm(const float *x, const float *weight, float *out, int64_t rows,
             int64_t dim, double eps, cudaStream_t stream) {
  if (rows)
    rmsNormKernel<<<rows, kThreads, 0, stream>>>(x, weight, out, dim, eps);
}

void rmsNormGrad(const float *x, const float *weight, const float *grad,
                 float *out, int64_t rows, int64_t dim, double eps,
                 cudaStream_t stream) {
  if (rows)
    rmsNormGradKernel<<<rows, kThreads, 0, stream>>>(x, weight, grad, out, dim,
                                                     eps);
}

void rmsNormWeightGrad(const float *x, const float *grad, float *out,
                       int64_t rows, int64_t dim, double eps, float *scratch,
                       cudaStream_t stream) {
  if (rows)
    rowInverseRmsKernel<<<rows, kThreads, 0, stream>>>(x, dim, eps, scratch);
  rmsNormWeightGradKernel<<<blocksFor(dim), kThreads, 0, stream>>>(
      x, grad, scratch, out, rows, dim);
}

void rope(const float *x, const int32_t *positions, float *out, int64_t tokens,
          int64_t heads, int64_t headDim, const double *frequencies,
          bool inverse, cudaStream_t stream) {
  ropeKernel<<<blocksFor(tokens * heads * (headDim / 2)), kThreads, 0,
               stream>>>(x, positions, out, tokens, heads, headDim,
                         frequencies, inverse);
}

void attention(const float *q, const float *k, const float *v,
               const int32_t *segments, float *out, int64_t batch, int64_t seq,
               HeadBlock heads, int64_t kvHeads, int64_t headDim, double scale,
               cudaStream_t stream) {
  if (!batch || !seq || !heads.count)
    return;
  size_t shared = seq * sizeof(float);
  cudaFuncSetAttribute(attentionKernel,
                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(shared));
  attentionKernel<<<dim3(seq, heads.count, batch), kThreads, shared, stream>>>(
      q, k, v, segments, out, seq, heads, kvHeads, headDim, scale);
}

void attentionGrad(const float *q, const float *k, const float *v,
                   const float *output, const float *grad,
                   const int32_t *segments, float *queryGrad, float *keyGrad,
                   float *valueGrad, int64_t batch, int64_t seq, HeadBlock heads,
                   int64_t kvHeads, int64_t headDim, double scale,
                   cudaStream_t stream) {
  size_t kvBytes = batch * seq * kvHeads * headDim * sizeof(float);
  cudaMemsetAsync(keyGrad, 0, kvBytes, stream);
  cudaMemsetAsync(valueGrad, 0, kvBytes, stream);
  if (!batch || !seq || !heads.count)
    return;
  size_t shared = seq * sizeof(float);
  cudaFuncSetAttribute(attentionGradKernel,
                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                       int(shared));
  attentionGradKernel<<<dim3(seq, heads.count, batch), kThreads, shared,
                        stream>>>(q, k, v, output, grad, segments, queryGrad,
                                  keyGrad, valueGrad, seq, heads, kvHeads,
                                  headDim, scale);
}

void binary(Binary op, const float *lhs, const float *rhs, float *out,
            int64_t count, cudaStream_t stream) {
  binaryKernel<<<blocksFor(count), kThreads, 0, stream>>>(op, lhs, rhs, out,
                                                          count);
}

void scale(const float *x, double factor, float *out, int64_t count,
           cudaStream_t stream) {
  scaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, float(factor), out,
                                                         count);
}

void swigluGrad(const float *gate, const float *up, const float *grad,
                float *gateGrad, float *upGrad, int64_t count,
                cudaStream_t stream) {
  swigluGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(
      gate, up, grad, gateGrad, upGrad, count);
}

void softmaxMaxAndTarget(const float *logits, const int32_t *labels,
                         int64_t rows, VocabBlock vocab, int64_t ignoreIndex,
                         double *max, double *target, int *errors,
                         cudaStream_t stream) {
  if (rows)
    softmaxMaxAndTargetKernel<<<rows, kThreads, 0, stream>>>(
        logits, labels, vocab, ignoreIndex, max, target, errors);
}

void softmaxSum(const float *logits, int64_t rows, VocabBlock vocab,
                const double *max, double *sum, cudaStream_t stream) {
  if (rows)
    softmaxSumKernel<<<rows, kThreads, 0, stream>>>(logits, vocab, max, sum);
}

void crossEntropyLoss(const int32_t *labels, int64_t rows,
                      int64_t ignoreIndex, const double *max,
                      const double *sum, const double *target, float *loss,
                      int64_t *count, cudaStream_t stream) {
  crossEntropyLossKernel<<<1, kThreads, 0, stream>>>(
      labels, rows, ignoreIndex, max, sum, target, loss, count);
}

void crossEntropyGrad(const float *logits, const int32_t *labels, int64_t rows,
                      VocabBlock vocab, int64_t ignoreIndex, const double *max,
                      const double *sum, const float *lossGrad, float *out,
                      cudaStream_t stream) {
  crossEntropyGradKernel<<<blocksFor(rows * vocab.columns), kThreads, 0,
                           stream>>>(logits, labels, rows, vocab, ignoreIndex,
                                     max, sum, lossGrad, out);
}

void transpose(const float *x, const int64_t *shape, const int64_t *permutation,
               int rank, float *out, cudaStream_t stream) {
  Permutation p{};
  p.rank = rank;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    p.shape[d] = shape[d];
    p.permutation[d] = permutation[d];
    count *= shape[d];
  }
  transposeKernel<<<blocksFor(count), kThreads, 0, stream>>>(x, p, out, count);
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
                                 first, static_cast<char *>(to), toSize,
                                 length, outer, sliceBytes);
}

void arrangeBlocks(const float *from, float *to, int64_t ranks, int64_t outer,
                   int64_t block, int64_t whole, int64_t inner, bool toWhole,
                   cudaStream_t stream) {
  arrangeBlocksKernel<<<blocksFor(ranks * outer * block * inner), kThreads, 0,
                        stream>>>(from, to, ranks, outer, block, whole, inner,
                                  toWhole);
}

} // namespace twill::cuda
