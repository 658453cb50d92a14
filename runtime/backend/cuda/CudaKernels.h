//===- CudaKernels.h - the cuda backend's kernels ---------------*- C++ -*-===//
//
// Device kernels, one launcher per op, all asynchronous on a stream. The
// model's values are stored as bf16 (`bf16` true) or fp32 and computed in
// fp32; optimizer state and scalars are fp32. Launchers take sizes the host
// already checked
// against the Executable; what only the device can see (a token id outside
// the vocabulary) raises a flag the backend reads after the run.
//
// Plain C++: CudaBackend.cpp includes it without nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H

#include "runtime/backend/Blocks.h"
#include "runtime/backend/ChunkedAttention.h"
#include "support/Dpo.h"
#include "support/Dropout.h"
#include "support/Fp8.h"
#include "support/Nf4.h"

#include <cstdint>
#include <cuda_runtime_api.h>

namespace twill::cuda {

/// Bits of the device error flag.
enum ErrorBit : int { kTokenOutsideVocab = 1, kLabelOutsideVocab = 2 };

void fill(void *out, int64_t count, float value, bool bf16,
          cudaStream_t stream);
enum class CastSource { F32, I32, I64, BF16 };
/// out (bf16 when `toBF16`, else fp32) = in converted; to bf16 rounds to
/// nearest even, as the cpu backend's floatToBF16.
void cast(const void *in, CastSource from, void *out, bool toBF16,
          int64_t count, cudaStream_t stream);

/// With `wholeTable`, an id outside [0, rows) raises kTokenOutsideVocab;
/// otherwise the table holds rows [firstRow, firstRow + rows) and other ids
/// give zeros.
void embedding(const void *table, int64_t rows, int64_t dim, const int32_t *ids,
               int64_t count, void *out, int64_t firstRow, bool wholeTable,
               int *errors, bool bf16, cudaStream_t stream);
/// Adds each position's gradient row into its id's row of `out` (zeroed
/// before).
void embeddingGrad(const int32_t *ids, int64_t count, const float *grad,
                   int64_t rows, int64_t dim, float *out, int *errors,
                   cudaStream_t stream);

void rmsNorm(const void *x, const void *weight, void *out, int64_t rows,
             int64_t dim, double eps, bool bf16, cudaStream_t stream);
void rmsNormGrad(const void *x, const void *weight, const void *grad, void *out,
                 int64_t rows, int64_t dim, double eps, bool bf16,
                 cudaStream_t stream);
/// `scratch` holds `rows` doubles.
void rmsNormWeightGrad(const void *x, const void *grad, void *out, int64_t rows,
                       int64_t dim, double eps, double *scratch, bool bf16,
                       cudaStream_t stream);

/// `frequencies`: headDim / 2 values in device memory.
void rope(const void *x, const int32_t *positions, void *out, int64_t tokens,
          int64_t heads, int64_t headDim, const double *frequencies,
          bool inverse, bool bf16, cudaStream_t stream);

/// attention's row kernels (ChunkedAttention.h); P and dS are bf16 when
/// `bf16`, else fp32.
void softmaxRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream);
void probabilityRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream);
void softmaxGradRows(const SoftmaxRows &rows, bool bf16, cudaStream_t stream);

enum class Binary { Add, Mul, Div, Swiglu, Geglu, SigmoidGate };
void binary(Binary op, const void *lhs, const void *rhs, void *out,
            int64_t count, bool bf16, cudaStream_t stream);
void scale(const void *x, double factor, void *out, int64_t count, bool bf16,
           cudaStream_t stream);
void squareRoot(const void *x, void *out, int64_t count, bool bf16,
                cudaStream_t stream);
/// out = cap tanh(x / cap); with `grad`, its gradient, grad (1 - tanh^2(x /
/// cap)).
void softcap(const void *x, const void *grad, double cap, void *out,
             int64_t count, bool bf16, cudaStream_t stream);
/// DoRA's: out[r] = sum over c of x[r, c]^2 (a warp per row, in fp32);
/// out[r, c] = x[r, c] * scale[c]; and that op's gradients, the scale's
/// summed over the rows in fp32 (a thread per column).
void rowSumSquares(const void *x, int64_t rows, int64_t columns, void *out,
                   bool bf16, cudaStream_t stream);
void scaleColumns(const void *x, const void *scale, int64_t rows,
                  int64_t columns, void *out, bool bf16, cudaStream_t stream);
void scaleColumnsGrad(const void *x, const void *scale, const void *grad,
                      int64_t rows, int64_t columns, void *inputGrad,
                      void *scaleGrad, bool bf16, cudaStream_t stream);
/// A bias: out[r, c] = x[r, c] + bias[c]; and its gradient, out[c] = sum
/// over r of x[r, c] (a thread per column, in fp32).
void addColumns(const void *x, const void *bias, int64_t rows, int64_t columns,
                void *out, bool bf16, cudaStream_t stream);
void columnSums(const void *x, int64_t rows, int64_t columns, void *out,
                bool bf16, cudaStream_t stream);
/// A block of an NF4 weight (support/Nf4.h) in the compute dtype, the
/// offset read from device memory; rows past the whole weight's are zero.
void dequantizeNf4(const uint8_t *codes, const uint8_t *absmax,
                   const float *nested, const float *offset,
                   const nf4::Geometry &g, void *out, bool bf16,
                   cudaStream_t stream);
/// An FP8 weight's [rows, columns] values (support/Fp8.h) in the compute
/// dtype, each times its row's scale.
void dequantizeFp8(const uint8_t *values, const float *scales, int64_t rows,
                   int64_t columns, void *out, bool bf16, cudaStream_t stream);
/// `rows` rows of `columns` values in the compute dtype, each row's blocks
/// of `block` rounded to e4m3 over their scale (support/Fp8.h).
void roundToFp8(const void *in, int64_t rows, int64_t columns, int64_t block,
                void *out, bool bf16, cudaStream_t stream);
/// Values round_to_fp8 rounded, as an FP8 GEMM reads them: their e4m3
/// codes (row-major) and each block's scale, `scales` [blocks of a row]
/// [rows] with the rows contiguous (cuBLASLt's VEC128_32F layout).
void encodeFp8Blocks(const void *in, int64_t rows, int64_t columns,
                     int64_t block, uint8_t *codes, float *scales, bool bf16,
                     cudaStream_t stream);
/// An FP8 weight's row scales as VEC128_32F scales of `blocks` blocks of
/// its rows: out[b * rows + r] = rowScales[r].
void broadcastRowScales(const float *rowScales, int64_t rows, int64_t blocks,
                        float *out, cudaStream_t stream);
/// dpo_loss's sums over `pairs` pairs (support/Dpo.h's sumPairs, one
/// thread: the cpu's order), and its gradient, the loss sum's gradient
/// read from device memory.
void dpoLoss(const float *policy, const float *reference, const int64_t *tokens,
             int64_t pairs, const dpo::Settings &s, float *loss,
             int64_t *counted, float *metrics, cudaStream_t stream);
void dpoLossGrad(const float *policy, const float *reference,
                 const int64_t *tokens, int64_t pairs, const dpo::Settings &s,
                 const float *lossGrad, float *out, cudaStream_t stream);
/// LoRA's dropout (support/Dropout.h) of `tokens` rows of `features`, the
/// micro-batch read from device memory.
void dropout(const void *x, const int32_t *tokenIndex,
             const int64_t *microBatch, int64_t tokens, int64_t features,
             int64_t firstFeature, const DropoutKey &key, double rate,
             void *out, bool bf16, cudaStream_t stream);
/// The gated activations whose gradients gatedGrad computes.
enum class Gated { Swiglu, Geglu, Sigmoid };
/// dL/dgate and dL/dup of a gated activation of `kind`.
void gatedGrad(Gated kind, const void *gate, const void *up, const void *grad,
               void *gateGrad, void *upGrad, int64_t count, bool bf16,
               cudaStream_t stream);

/// Cross-entropy in stages, so that a vocab-parallel row's statistics can
/// be all-reduced between them: per row the max logit and the label's
/// logit (0 where another rank holds it), then the sum of exp(logit - max).
/// Each reads the logits as stored (bf16 in a bf16 program): no fp32 copy
/// of the vocab-wide logits is ever made.
void softmaxMaxAndTarget(const void *logits, const int32_t *labels,
                         int64_t rows, VocabBlock vocab, int64_t ignoreIndex,
                         double *max, double *target, int *errors, bool bf16,
                         cudaStream_t stream);
void softmaxSum(const void *logits, int64_t rows, VocabBlock vocab,
                const double *max, double *sum, bool bf16, cudaStream_t stream);
/// loss = sum over counted rows of log(sum) + max - target; count = rows;
/// with `buckets`' sequences, a sum and count per row and sequence.
void crossEntropyLoss(const int32_t *labels, int64_t rows, int64_t ignoreIndex,
                      const double *max, const double *sum,
                      const double *target, const LossBuckets &buckets,
                      float *loss, int64_t *count, cudaStream_t stream);
/// out = (softmax - onehot) * the gradient of the row's sum (`lossGrads`'
/// of its bucket; in place allowed); with `softcap` (> 0) the logits are
/// capped ones and out is also scaled by the cap's derivative, 1 - (logit
/// / softcap)^2.
void crossEntropyGrad(const void *logits, const int32_t *labels, int64_t rows,
                      VocabBlock vocab, int64_t ignoreIndex, const double *max,
                      const double *sum, const float *lossGrads,
                      const LossBuckets &buckets, double softcap, void *out,
                      bool bf16, cudaStream_t stream);

/// out = x with dims permuted (rank at most 8).
void transpose(const void *x, const int64_t *shape, const int64_t *permutation,
               int rank, void *out, bool bf16, cudaStream_t stream);

/// accumulator (one double, zeroed first) += sum of x^2.
void accumulateSquares(const float *x, int64_t count, double *accumulator,
                       cudaStream_t stream);
/// out = sqrt(accumulator), or accumulator with `root` false.
void finishSquares(const double *accumulator, bool root, float *out,
                   cudaStream_t stream);
void clipCoefficient(const float *norm, double maxNorm, float *out,
                     cudaStream_t stream);
void scheduledLr(const int64_t *step, const int64_t *totalSteps, double lr,
                 int64_t warmupSteps, float *out, cudaStream_t stream);
void increment(const int64_t *in, int64_t *out, cudaStream_t stream);
/// out = a + b, `count` counts each.
void addCounts(const int64_t *a, const int64_t *b, int64_t *out, int64_t count,
               cudaStream_t stream);

void adamw(const float *param, const float *grad, const float *expAvg,
           const float *expAvgSq, const float *lr, const float *gradScale,
           const int64_t *step, AdamWSettings settings, float *newParam,
           float *newExpAvg, float *newExpAvgSq, int64_t count,
           cudaStream_t stream);

/// For every index of the dims before a dim: `length` slices of it from
/// `from` (starting at slice `first` of `fromSize`) into the start of `to`
/// (`toSize` slices), zero-filling the rest; a slice is `sliceBytes` bytes.
void copyAlongDim(const void *from, int64_t fromSize, int64_t first, void *to,
                  int64_t toSize, int64_t length, int64_t outer,
                  int64_t sliceBytes, cudaStream_t stream);
/// [ranks][outer][block][inner] (what NCCL gathers) <-> [outer][whole][inner]
/// (the tensor, `whole` <= ranks * block): `toWhole` drops the padding,
/// the other way zero-fills it; elements of `elementBytes` (1, 2 or 4).
void arrangeBlocks(const void *from, void *to, int64_t ranks, int64_t outer,
                   int64_t block, int64_t whole, int64_t inner, bool toWhole,
                   int elementBytes, cudaStream_t stream);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAKERNELS_H
