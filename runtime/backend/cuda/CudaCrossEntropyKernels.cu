//===- CudaCrossEntropyKernels.cu - the vocab-parallel loss ---------------===//
//
// Row statistics (maximum, target logit, sum of exponentials) over the
// block of the vocab this rank holds, all-reduced by the backend between
// kernels, then the loss or its gradient. Exponentials are fp32 intrinsics
// of arguments at most 0; the statistics are kept in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

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
  float best = float(max[row]); // a logit's value, exact in fp32
  double total = 0;
  for (int64_t i = threadIdx.x; i < columns; i += blockDim.x)
    total += __expf(load(z[i]) - best);
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

/// The sums per row and sequence: one thread a sum, adding its row's
/// positions of its sequence in order (the cpu's).
__global__ void sequenceLossKernel(const int32_t *labels, int64_t rows,
                                   int64_t ignoreIndex, const double *max,
                                   const double *sum, const double *target,
                                   LossBuckets buckets, float *loss,
                                   int64_t *count) {
  int64_t perRow = buckets.positionsPerRow;
  GRID_STRIDE(b, buckets.count(rows)) {
    int64_t first = b / buckets.sequences * perRow;
    double total = 0;
    int64_t counted = 0;
    for (int64_t p = first; p < first + perRow; ++p)
      if (labels[p] != ignoreIndex && buckets.of(p) == b) {
        total += log(sum[p]) + max[p] - target[p];
        ++counted;
      }
    loss[b] = float(total);
    count[b] = counted;
  }
}

template <typename T>
__global__ void
crossEntropyGradKernel(const T *logits, const int32_t *labels, int64_t rows,
                       VocabBlock vocab, int64_t ignoreIndex, const double *max,
                       const double *sum, const float *lossGrads,
                       LossBuckets buckets, float softcap, T *out) {
  int64_t columns = validColumns(vocab);
  GRID_STRIDE(i, rows * vocab.columns) {
    int64_t row = i / vocab.columns, column = i % vocab.columns;
    int64_t label = labels[row], bucket = buckets.of(row);
    float value = 0.0f;
    if (label != ignoreIndex && bucket >= 0 && column < columns) {
      float lossGrad = lossGrads[bucket];
      float logit = load(logits[i]);
      value = __expf(logit - float(max[row])) * float(lossGrad / sum[row]);
      if (column == label - vocab.first)
        value -= lossGrad;
      if (softcap > 0) { // logit = softcap tanh(z / softcap)
        float capped = logit / softcap;
        value *= 1.0f - capped * capped;
      }
    }
    out[i] = storeAs<T>(value);
  }
}

__global__ void dpoLossKernel(const float *policy, const float *reference,
                              const int64_t *tokens, int64_t pairs,
                              dpo::Settings s, float *loss, int64_t *counted,
                              float *metrics) {
  dpo::sumPairs(policy, reference, tokens, pairs, s, loss, counted, metrics);
}

__global__ void dpoLossGradKernel(const float *policy, const float *reference,
                                  const int64_t *tokens, int64_t pairs,
                                  dpo::Settings s, const float *lossGrad,
                                  float *out) {
  GRID_STRIDE(i, pairs)
  dpo::pairGradient(policy, reference, tokens, i, s, *lossGrad, out);
}

} // namespace

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
                      const double *target, const LossBuckets &buckets,
                      float *loss, int64_t *count, cudaStream_t stream) {
  if (buckets.sequence)
    sequenceLossKernel<<<blocksFor(buckets.count(rows)), kThreads, 0, stream>>>(
        labels, rows, ignoreIndex, max, sum, target, buckets, loss, count);
  else
    crossEntropyLossKernel<<<1, kThreads, 0, stream>>>(
        labels, rows, ignoreIndex, max, sum, target, loss, count);
}

void crossEntropyGrad(const void *logits, const int32_t *labels, int64_t rows,
                      VocabBlock vocab, int64_t ignoreIndex, const double *max,
                      const double *sum, const float *lossGrads,
                      const LossBuckets &buckets, double softcap, void *out,
                      bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    crossEntropyGradKernel<<<blocksFor(rows * vocab.columns), kThreads, 0,
                             stream>>>(
        static_cast<const T *>(logits), labels, rows, vocab, ignoreIndex, max,
        sum, lossGrads, buckets, float(softcap), static_cast<T *>(out));
  });
}

void dpoLoss(const float *policy, const float *reference, const int64_t *tokens,
             int64_t pairs, const dpo::Settings &s, float *loss,
             int64_t *counted, float *metrics, cudaStream_t stream) {
  dpoLossKernel<<<1, 1, 0, stream>>>(policy, reference, tokens, pairs, s, loss,
                                     counted, metrics);
}

void dpoLossGrad(const float *policy, const float *reference,
                 const int64_t *tokens, int64_t pairs, const dpo::Settings &s,
                 const float *lossGrad, float *out, cudaStream_t stream) {
  dpoLossGradKernel<<<blocksFor(pairs), kThreads, 0, stream>>>(
      policy, reference, tokens, pairs, s, lossGrad, out);
}

} // namespace twill::cuda
