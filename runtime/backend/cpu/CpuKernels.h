//===- CpuKernels.h - fp32 reference kernels --------------------*- C++ -*-===//
//
// One function per twill op, on raw row-major fp32 arrays with explicit
// sizes: the CPU backend's instruction set and the reference every other
// backend is checked against. Its own reductions run in a fixed order, so
// their results do not depend on the thread count; oneDNN's GEMMs split a
// sum across threads only for small products on many threads (seen at 16
// threads, an 8 x 512 x 1024 product, never at 2 or 4), which then differ
// in the last bits. Shapes are checked by the caller; values that come
// from data (token ids, labels) are checked here.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUKERNELS_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUKERNELS_H

#include "runtime/backend/Blocks.h"
#include "runtime/backend/ChunkedAttention.h"
#include "runtime/backend/TiledLogits.h"
#include "support/Dropout.h"
#include "support/Fp8.h"
#include "support/Nf4.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace twill::cpu {

/// out[i, :] = table[ids[i], :] for `count` ids and rows of `dim` values.
/// With `firstRow`, the table is one rank's block of rows from that id on
/// (vocab parallel): other ids give zero rows.
llvm::Error embedding(const float *table, int64_t vocab, int64_t dim,
                      const int32_t *ids, int64_t count, float *out,
                      std::optional<int64_t> firstRow = std::nullopt);

/// A block of an NF4 weight in fp32 (support/Nf4.h): `codes` [rows,
/// columns / 2], `absmax` [rows, columns / blockSize], `nested` the whole
/// weight's; rows past the whole weight's (a rank's padding) are zero.
void dequantizeNf4(const uint8_t *codes, const uint8_t *absmax,
                   const float *nested, float offset, const nf4::Geometry &g,
                   float *out);

/// An FP8 weight's [rows, columns] values (e4m3 bytes, support/Fp8.h) in
/// fp32: each times its row's scale.
void dequantizeFp8(const uint8_t *values, const float *scales, int64_t rows,
                   int64_t columns, float *out);

/// `rows` rows of `columns` values, each row's blocks of `block` (the last
/// one shorter where `block` does not divide) rounded to e4m3 over their
/// scale (support/Fp8.h's blockScale and roundInBlock).
void roundToFp8(const float *in, int64_t rows, int64_t columns, int64_t block,
                float *out);

/// A row-major GEMM (Gemm.h) on fp32 values, through oneDNN.
void gemm(const RowMajorGemm &g);

/// A product with a [rows, columns] weight never formed whole: `out`
/// (`count` values) starts as `addend` (none: zeros); then for each panel
/// of at most `panelRows` rows [first, first + n), `form(first, n, panel)`
/// writes them (fp32, row-major) and the GEMM `gemmOf(first, n, panel)`
/// adds their part of the product into `out`.
void panelProduct(
    int64_t rows, int64_t columns, int64_t panelRows, const float *addend,
    float *out, int64_t count,
    llvm::function_ref<void(int64_t, int64_t, float *)> form,
    llvm::function_ref<RowMajorGemm(int64_t, int64_t, const float *)> gemmOf);

/// Each of `rows` rows of `dim` values: x / sqrt(mean(x^2) + eps) * weight.
void rmsNorm(const float *x, const float *weight, float *out, int64_t rows,
             int64_t dim, double eps);

/// Rotary embedding of x [tokens, heads, headDim], token t at positions[t],
/// pairing element i with i + headDim / 2 (Hugging Face's rotate_half).
/// `inverse` rotates by the negated angles: rope's gradient.
void rope(const float *x, const int32_t *positions, float *out, int64_t tokens,
          int64_t heads, int64_t headDim, double theta,
          const RopeFrequencyScaling &scaling, bool inverse = false);

/// attention's row kernels (ChunkedAttention.h), on fp32 P and dS.
void softmaxRows(const SoftmaxRows &rows);
void probabilityRows(const SoftmaxRows &rows);
void softmaxGradRows(const SoftmaxRows &rows);

/// The scores of one chunk of queries a cpu attention thread keeps at once.
inline constexpr int64_t kAttentionBudgetBytes = 32 << 20;

/// Causal grouped-query attention over [batch, seq, heads, headDim] inputs;
/// with `segments` ([batch, seq]) a query sees only keys of its segment.
/// Each query row's log-sum-exp goes to `logSumExp` [batch, heads, seq]
/// (where it is not null). Runs as chunks of queries (ChunkedAttention.h)
/// whose scores fit in `budgetBytes`.
void attention(const float *q, const float *k, const float *v,
               const int32_t *segments, float *out, float *logSumExp,
               int64_t batch, int64_t seq, HeadBlock heads, int64_t kvHeads,
               int64_t headDim, const AttentionLogits &logits,
               int64_t budgetBytes = kAttentionBudgetBytes);

/// to = from over `count` values, on every thread (nothing when they are
/// the same values).
void copy(const float *from, float *to, int64_t count);

/// out = silu(gate) * up over `count` values.
void swiglu(const float *gate, const float *up, float *out, int64_t count);
/// out = gelu(gate) * up over `count` values, GELU's tanh form (PyTorch's
/// gelu(approximate="tanh")).
void geglu(const float *gate, const float *up, float *out, int64_t count);
/// out = sigmoid(gate) * up over `count` values.
void sigmoidGate(const float *gate, const float *up, float *out, int64_t count);
void add(const float *lhs, const float *rhs, float *out, int64_t count);
void mul(const float *lhs, const float *rhs, float *out, int64_t count);
void div(const float *lhs, const float *rhs, float *out, int64_t count);
void scale(const float *x, double factor, float *out, int64_t count);
/// out = cap tanh(x / cap); its gradient, out = grad (1 - tanh^2(x / cap)).
void softcap(const float *x, double cap, float *out, int64_t count);
void softcapGrad(const float *x, const float *grad, double cap, float *out,
                 int64_t count);
/// DoRA's: out[r] = sum over c of x[r, c]^2 (summed in double), for
/// `rows` rows of `columns`.
void rowSumSquares(const float *x, int64_t rows, int64_t columns, float *out);
/// out[r, c] = x[r, c] * scale[c].
void scaleColumns(const float *x, const float *scale, int64_t rows,
                  int64_t columns, float *out);
/// scale_columns' gradients: inputGrad[r, c] = grad[r, c] * scale[c],
/// scaleGrad[c] = sum over r of grad[r, c] * x[r, c] (summed in double).
void scaleColumnsGrad(const float *x, const float *scale, const float *grad,
                      int64_t rows, int64_t columns, float *inputGrad,
                      float *scaleGrad);
/// A bias: out[r, c] = x[r, c] + bias[c]; and its gradient, out[c] = sum
/// over r of x[r, c] (summed in double).
void addColumns(const float *x, const float *bias, int64_t rows,
                int64_t columns, float *out);
void columnSums(const float *x, int64_t rows, int64_t columns, float *out);
/// LoRA's dropout of `tokens` rows of `features` (global features
/// [firstFeature, firstFeature + features)): out = x * keep / (1 - rate),
/// keep from support/Dropout.h for each row's token index.
void dropout(const float *x, const int32_t *tokenIndex, int64_t tokens,
             int64_t features, int64_t firstFeature, const DropoutKey &key,
             double rate, float *out);

/// Sums a per-row statistic of every rank's block (max or sum), in place;
/// for a whole vocab it does nothing.
using RowReduce =
    llvm::function_ref<llvm::Error(std::vector<double> &rows, bool max)>;

/// Sums over `rows` rows of logsumexp(logits) - logits[label], skipping
/// rows whose label is `ignoreIndex`: one sum, or with `buckets` each row
/// sequence's (`buckets.count(rows)` of them); `count` gets how many rows
/// each sums.
llvm::Error crossEntropy(const float *logits, const int32_t *labels,
                         int64_t rows, VocabBlock block, int64_t ignoreIndex,
                         RowReduce reduce, const LossBuckets &buckets,
                         float *loss, int64_t *count);

/// crossEntropy of the logits `input weight^T` (TiledLogits), formed
/// `shape.tileRows` rows at a time in `tile`: the same sums.
llvm::Error linearCrossEntropy(const float *input, const float *weight,
                               const int32_t *labels, const TiledLogits &shape,
                               int64_t ignoreIndex, RowReduce reduce,
                               const LossBuckets &buckets, float *tile,
                               float *loss, int64_t *count);

/// out = x with dims permuted: out dim i is x dim permutation[i].
void transpose(const float *x, const int64_t *shape, const int64_t *permutation,
               int64_t rank, float *out);

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

void fill(float *out, int64_t count, double value);

/// out [vocab, dim] = sum of the grad rows of each id.
llvm::Error embeddingGrad(const int32_t *ids, int64_t count, const float *grad,
                          int64_t vocab, int64_t dim, float *out);

/// dL/dx of rms_norm, for `rows` rows of `dim` values.
void rmsNormGrad(const float *x, const float *weight, const float *grad,
                 float *out, int64_t rows, int64_t dim, double eps);

/// dL/dweight of rms_norm: summed over rows in row order.
void rmsNormWeightGrad(const float *x, const float *grad, float *out,
                       int64_t rows, int64_t dim, double eps);

/// dL/dq, dL/dk, dL/dv of `attention`, given dL/doutput; the probabilities
/// are remade chunk by chunk from the forward's `logSumExp` (or, null,
/// recomputed with it). Key and value gradients are summed in a fixed
/// order: deterministic.
void attentionGrad(const float *q, const float *k, const float *v,
                   const float *logSumExp, const float *grad,
                   const int32_t *segments, float *queryGrad, float *keyGrad,
                   float *valueGrad, int64_t batch, int64_t seq,
                   HeadBlock heads, int64_t kvHeads, int64_t headDim,
                   const AttentionLogits &logits,
                   int64_t budgetBytes = kAttentionBudgetBytes);

/// dL/dgate and dL/dup of silu(gate) * up.
void swigluGrad(const float *gate, const float *up, const float *grad,
                float *gateGrad, float *upGrad, int64_t count);
/// dL/dgate and dL/dup of gelu(gate) * up (GELU's tanh form).
void gegluGrad(const float *gate, const float *up, const float *grad,
               float *gateGrad, float *upGrad, int64_t count);
/// dL/dgate and dL/dup of sigmoid(gate) * up.
void sigmoidGateGrad(const float *gate, const float *up, const float *grad,
                     float *gateGrad, float *upGrad, int64_t count);

/// dL/dlogits of the summed cross-entropy: (softmax - onehot) times the
/// gradient of the row's sum (`lossGrads`, one per bucket) on counted rows,
/// zero on ignored ones and rows of no sum.
llvm::Error crossEntropyGrad(const float *logits, const int32_t *labels,
                             int64_t rows, VocabBlock block,
                             int64_t ignoreIndex, RowReduce reduce,
                             const LossBuckets &buckets, const float *lossGrads,
                             float *out);

/// The gradient of linearCrossEntropy's sums (times `lossGrads`) with
/// respect to the input, or with `shape.wrtWeight` to the weight, the
/// logits and their gradient formed in `tile` one tile of rows at a time.
llvm::Error linearCrossEntropyGrad(const float *input, const float *weight,
                                   const int32_t *labels,
                                   const TiledLogits &shape,
                                   int64_t ignoreIndex, RowReduce reduce,
                                   const LossBuckets &buckets,
                                   const float *lossGrads, float *tile,
                                   float *out);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// Adds the squares of `count` values to `sumSquares`, in order.
void accumulateSquares(const float *x, int64_t count, double &sumSquares);

/// One torch.optim.AdamW update (step = optimizer steps already taken) of
/// `count` values; `param`, `expAvg` and `expAvgSq` get the new values.
void adamw(const float *param, const float *grad, const float *expAvg,
           const float *expAvgSq, float lr, float gradScale, int64_t step,
           const AdamWSettings &settings, float *newParam, float *newExpAvg,
           float *newExpAvgSq, int64_t count);

} // namespace twill::cpu

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUKERNELS_H
