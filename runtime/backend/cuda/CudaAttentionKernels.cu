//===- CudaAttentionKernels.cu - attention's row kernels ------------------===//
//
// The masked softmax of a chunk's score rows and its gradient
// (ChunkedAttention.h); the products are cuBLAS GEMMs (CudaAttention.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

/// P over row `row`'s visible keys, from the row's log-sum-exp.
template <typename T>
__device__ void probabilityRow(const SoftmaxRows &s, int64_t row, float lse) {
  int64_t query = s.firstQuery + row % s.rows;
  const float *scores = s.scores + row * s.keys;
  T *p = static_cast<T *>(s.probabilities) + row * s.keys;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    p[j] = storeAs<T>(s.visible(query, j) ? __expf(s.logit(scores[j]) - lse)
                                          : 0.0f);
}

/// One block per row of scores (ChunkedAttention.h): P = softmax over the
/// visible keys of the logits (scaled, soft-capped scores), and the row's
/// log-sum-exp. The exponentials are fp32 intrinsics (their arguments are
/// at most 0), the sum is kept in double.
template <typename T> __global__ void softmaxRowsKernel(SoftmaxRows s) {
  int64_t row = blockIdx.x, query = s.firstQuery + row % s.rows;
  const float *scores = s.scores + row * s.keys;
  float best = -INFINITY;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    if (s.visible(query, j))
      best = fmaxf(best, s.logit(scores[j]));
  best = float(blockMax(best));
  double total = 0;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    if (s.visible(query, j))
      total += __expf(s.logit(scores[j]) - best);
  float lse = float(best + log(blockSum(total)));
  probabilityRow<T>(s, row, lse);
  if (threadIdx.x == 0)
    s.lseOf(row) = lse;
}

/// One block per row: P from the row's kept log-sum-exp, in one pass.
template <typename T> __global__ void probabilityRowsKernel(SoftmaxRows s) {
  probabilityRow<T>(s, blockIdx.x, s.lseOf(blockIdx.x));
}

/// One block per row: dS = P (dP - sum_j P_j dP_j) scale, P recomputed
/// from the scores and the row's log-sum-exp.
template <typename T> __global__ void softmaxGradRowsKernel(SoftmaxRows s) {
  int64_t row = blockIdx.x, query = s.firstQuery + row % s.rows;
  const float *scores = s.scores + row * s.keys;
  const float *dP = s.probabilityGrad + row * s.keys;
  T *dS = static_cast<T *>(s.scoreGrad) + row * s.keys;
  float lse = s.lseOf(row);
  auto probability = [&](int64_t j) {
    return s.visible(query, j) ? __expf(s.logit(scores[j]) - lse) : 0.0f;
  };
  double rowDot = 0;
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    rowDot += probability(j) * dP[j];
  float dot = float(blockSum(rowDot));
  for (int64_t j = threadIdx.x; j < s.keys; j += blockDim.x)
    dS[j] =
        storeAs<T>(probability(j) * (dP[j] - dot) * s.logitSlope(scores[j]));
}

} // namespace

void softmaxRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream) {
  if (rows.heads * rows.rows)
    stored(bf16, [&](auto *tag) {
      softmaxRowsKernel<STORED(tag)>
          <<<rows.heads * rows.rows, kThreads, 0, stream>>>(rows);
    });
}

void probabilityRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream) {
  if (rows.heads * rows.rows)
    stored(bf16, [&](auto *tag) {
      probabilityRowsKernel<STORED(tag)>
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

} // namespace twill::cuda
