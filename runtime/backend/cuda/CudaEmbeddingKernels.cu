//===- CudaEmbeddingKernels.cu - the embedding and its gradient -----------===//
//
// Table rows gathered per token; the gradient sums the rows of each id
// into a table its runner zeroes.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

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

} // namespace

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
  embeddingGradKernel<<<blocksFor(count * dim), kThreads, 0, stream>>>(
      ids, count, grad, rows, dim, out, errors);
}

} // namespace twill::cuda
