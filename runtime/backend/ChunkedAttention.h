//===- ChunkedAttention.h - attention over query chunks ---------*- C++ -*-===//
//
// Causal grouped-query attention (and its gradient) as a schedule of GEMMs
// and two row kernels, run chunk of queries by chunk: the scores of one
// chunk against the keys it can see (keys 0 .. its last query: causality
// halves the work; with a sliding window, from its first query's window
// on) are the only scores that ever exist, so memory is
// bounded by the chunk size, never seq^2 x heads, and every FLOP of QK^T,
// PV and their gradients runs in the backend's GEMM (oneDNN, cuBLAS on
// tensor cores). One schedule for every backend: the cpu backend
// checks it against the reference and PyTorch, the cuda backend runs the
// same calls.
//
// The query heads that share a KV head are stacked (their chunk rows copied
// head after head), so each product is one GEMM for all of them.
//
// The forward keeps each query row's log-sum-exp (the op's second
// result); the gradient remakes the chunk's probabilities from its scores
// and those, without a pass for each row's max and sum (or, given none,
// recomputes them as the forward does). Key and value gradients of a KV
// head accumulate in fp32 over chunks, in a fixed order.
//
// A group (one batch row's KV head and the query heads it serves) shares
// nothing with another: the backend may run groups concurrently
// (Ops::forEachGroup), each with scratch of its own, and the results do not
// depend on how it does.
//
// Values are [batch, seq, heads, headDim] of the backend's storage type;
// scores, their gradients and the accumulators are fp32.
//
// `Ops` supplies (duck-typed):
//   void gemm(const RowMajorGemm &);            // Gemm.h
//   void softmaxRows(const SoftmaxRows &);      // scores -> P (storage), lse
//   void probabilityRows(const SoftmaxRows &);  // scores and lse -> P
//   void softmaxGradRows(const SoftmaxRows &);  // dP, and P as softmaxRows
//                                               // left it (or scores and
//                                               // lse to remake it) -> dS
//   void zero(float *, int64_t count);
//   void store(const float *from, void *to, int64_t count); // to storage
//   void *scratch(int slot, int64_t bytes);     // slots 0-4, 7-9: the
//                                               // calling group's own; 5
//                                               // and 6: the whole call's
//   void copyRows(const void *from, int64_t fromStride, void *to,
//                 int64_t toStride, int64_t rows, int64_t width);
//                                               // storage-type rows
//   void forEachGroup(int64_t groups, F each);  // each(group) for every
//                                               // group, in any order or
//                                               // concurrently
//   static constexpr int64_t kMaxChunkRows;     // see chunkRows
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H
#define TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H

#include "runtime/backend/Blocks.h"
#include "runtime/backend/Gemm.h"
#include "support/HostDevice.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace twill {

/// Rows of scores for `heads` query heads x `rows` queries (query
/// firstQuery + r) against keys firstKey .. firstKey + keys - 1, each row
/// `keys` long, head after head. A key is visible when it is not after the
/// query, (with a window) less than `window` positions before it, and (with
/// segments) in the query's segment.
struct SoftmaxRows {
  const float *scores = nullptr; // [heads][rows][keys]
  /// Each row's log-sum-exp of its logits, head h's rows from lse + h *
  /// lseHeadStride: softmaxRows writes it, probabilityRows reads it.
  float *lse = nullptr;
  int64_t lseHeadStride = 0;
  void *probabilities = nullptr; // P, storage type: softmaxRows writes it
  const float *probabilityGrad = nullptr; // softmaxGradRows: dP
  void *scoreGrad = nullptr; // softmaxGradRows: dS (scaled), storage type
  const int32_t *segments = nullptr; // this batch row's, or null
  int64_t heads = 0, rows = 0, keys = 0, firstQuery = 0, firstKey = 0;
  int64_t window = 0; // 0: every earlier key
  double scale = 1;
  double softcap = 0; // Gemma 2's: logits softcap tanh(s / softcap); 0: none

  /// A key's logit from its score: scaled, and soft-capped (in float, on
  /// either side: tanhf is the host's and the device's).
  TWILL_HOST_DEVICE float logit(float score) const {
    float scaled = score * float(scale);
    if (softcap <= 0)
      return scaled;
    float cap = float(softcap);
    return cap * tanhf(scaled / cap);
  }
  /// d logit / d score.
  TWILL_HOST_DEVICE float logitSlope(float score) const {
    if (softcap <= 0)
      return float(scale);
    float t = tanhf(score * float(scale) / float(softcap));
    return float(scale) * (1.0f - t * t);
  }

  /// Row `row`'s log-sum-exp.
  TWILL_HOST_DEVICE float &lseOf(int64_t row) const {
    return lse[row / rows * lseHeadStride + row % rows];
  }

  /// Whether the key of column `column` is visible to `query`.
  TWILL_HOST_DEVICE bool visible(int64_t query, int64_t column) const {
    int64_t key = firstKey + column;
    return key <= query && (window <= 0 || query - key < window) &&
           (!segments || segments[key] == segments[query]);
  }
  /// The columns [visibleBegin, visibleEnd) of row `row` that may be
  /// visible: none before its query's window, none past the query.
  TWILL_HOST_DEVICE int64_t visibleBegin(int64_t row) const {
    int64_t query = firstQuery + row % rows;
    int64_t begin = window > 0 ? query - window + 1 - firstKey : 0;
    return begin > 0 ? begin : 0;
  }
  TWILL_HOST_DEVICE int64_t visibleEnd(int64_t row) const {
    int64_t end = firstQuery + row % rows + 1 - firstKey;
    return end < keys ? end : keys;
  }
};

struct AttentionProblem {
  const void *q, *k, *v;
  const int32_t *segments; // [batch, seq] or null
  int64_t batch, seq, kvHeads, headDim;
  HeadBlock heads;
  int elementBytes; // of the storage type
  AttentionLogits logits;
  /// [batch, heads.count, seq] fp32: the forward writes each query row's
  /// log-sum-exp, the gradient reads it. Null: the forward keeps none,
  /// and the gradient recomputes it.
  float *logSumExp = nullptr;
};

namespace detail {

/// The local query heads [begin, end) that KV head `kvHead` serves.
inline std::pair<int64_t, int64_t>
servedHeads(const HeadBlock &heads, int64_t kvHeads, int64_t kvHead) {
  int64_t group = heads.total / kvHeads;
  int64_t begin = std::max<int64_t>(kvHead * group - heads.first, 0);
  int64_t end =
      std::min<int64_t>((kvHead + 1) * group - heads.first, heads.count);
  return {begin, std::max(begin, end)};
}

/// The most keys a chunk of `rows` queries sees: the whole sequence, or
/// with a window, its rows and the window before the first.
inline int64_t chunkKeys(const AttentionProblem &p, int64_t rows) {
  int64_t window = p.logits.window;
  return window > 0 ? std::min(p.seq, rows + window - 1) : p.seq;
}

/// Queries per chunk: as many as keep one chunk's fp32 scores of a KV
/// group's heads (and what lives beside them) within `budgetBytes`, and no
/// more than the backend's `maxRows`. A chunk sees the keys up to its last
/// query, so smaller chunks skip more of the causal upper triangle (all but
/// 1/(2 x chunks) of it) while larger ones make larger GEMMs: the balance
/// is each backend's (Ops::kMaxChunkRows). A window bounds the keys a
/// chunk sees, so its chunks may hold more queries in the same budget.
inline int64_t chunkRows(const AttentionProblem &p, int64_t groupHeads,
                         int64_t budgetBytes, int64_t maxRows) {
  int64_t perKey = std::max<int64_t>(groupHeads, 1) *
                   (2 * sizeof(float) + 2 * p.elementBytes);
  int64_t most = std::min(p.seq, maxRows);
  int64_t rows = std::clamp<int64_t>(
      budgetBytes / std::max<int64_t>(perKey * p.seq, 1), 1, most);
  if (p.logits.window <= 0)
    return rows;
  // The most rows r whose r x chunkKeys(r) scores fit (`rows` do: a chunk
  // sees no more keys than the sequence has).
  int64_t scores = budgetBytes / perKey, high = most;
  while (rows < high) {
    int64_t middle = rows + (high - rows + 1) / 2;
    if (middle * chunkKeys(p, middle) <= scores)
      rows = middle;
    else
      high = middle - 1;
  }
  return rows;
}

inline const char *at(const void *base, int64_t elements, int bytes) {
  return static_cast<const char *>(base) + elements * bytes;
}
inline char *at(void *base, int64_t elements, int bytes) {
  return static_cast<char *>(base) + elements * bytes;
}

/// The scratch of one KV group's chunks: scores, row log-sum-exps and P;
/// the chunk's query rows of the group's heads stacked (head after head)
/// and a stacked result; for the gradient dP, dS and the stacked output
/// gradients.
struct ChunkScratch {
  int64_t rows; // queries per chunk
  float *scores, *lse;
  void *probabilities, *queries, *result;
  float *probabilityGrad = nullptr;
  void *scoreGrad = nullptr, *outputGrads = nullptr;
};

template <typename Ops>
ChunkScratch chunkScratch(Ops &ops, const AttentionProblem &p, int64_t g,
                          int64_t budgetBytes, bool gradient) {
  int64_t rows = chunkRows(p, g, budgetBytes, Ops::kMaxChunkRows),
          scores = g * rows * chunkKeys(p, rows),
          stacked = g * rows * p.headDim;
  ChunkScratch scratch{
      rows,
      static_cast<float *>(ops.scratch(0, scores * sizeof(float))),
      static_cast<float *>(ops.scratch(1, g * rows * sizeof(float))),
      ops.scratch(2, scores * p.elementBytes),
      ops.scratch(7, stacked * p.elementBytes),
      ops.scratch(8, stacked * p.elementBytes)};
  if (gradient) {
    scratch.probabilityGrad =
        static_cast<float *>(ops.scratch(3, scores * sizeof(float)));
    scratch.scoreGrad = ops.scratch(4, scores * p.elementBytes);
    scratch.outputGrads = ops.scratch(9, stacked * p.elementBytes);
  }
  return scratch;
}

/// One chunk of queries [first, first + rows) of batch row `b`, for the
/// query heads [h0, h0 + g) that KV head `kv` serves; it sees keys
/// [firstKey, firstKey + keys).
struct Chunk {
  int64_t b, kv, h0, g, first, rows, firstKey, keys;
};

/// Where the chunk's first query row of its first head is in a
/// [batch, seq, heads, D] tensor, in elements.
inline int64_t firstHeadRow(const AttentionProblem &p, const Chunk &c) {
  return ((c.b * p.seq + c.first) * p.heads.count + c.h0) * p.headDim;
}

/// Copies the chunk's rows of the group's heads from a [batch, seq, heads,
/// D] tensor (queries or output gradients) into [g][rows][D] stacked rows
/// (`stack`), or from stacked rows back into such a tensor: the GQA heads
/// of a group share their KV head, so stacked they make one GEMM of
/// g x rows rows instead of g GEMMs of `rows`.
template <typename Ops>
void copyHeadRows(Ops &ops, const AttentionProblem &p, const Chunk &c,
                  const void *from, void *to, bool stack) {
  int64_t D = p.headDim, tensorStride = p.heads.count * D;
  int e = p.elementBytes;
  for (int64_t x = 0; x < c.g; ++x) {
    int64_t inTensor = firstHeadRow(p, c) + x * D, inStack = x * c.rows * D;
    if (stack)
      ops.copyRows(at(from, inTensor, e), tensorStride, at(to, inStack, e), D,
                   c.rows, D);
    else
      ops.copyRows(at(from, inStack, e), D, at(to, inTensor, e), tensorStride,
                   c.rows, D);
  }
}

/// Where the chunk's first key row of its KV head is in a [batch, seq,
/// kvHeads, D] tensor (keys, values or their gradients), in elements.
inline int64_t firstKvRow(const AttentionProblem &p, const Chunk &c) {
  return ((c.b * p.seq + c.firstKey) * p.kvHeads + c.kv) * p.headDim;
}

/// The KV head's `keys` rows of `perKv` (keys or values) that the chunk
/// sees, as a GEMM operand.
inline const void *kvRows(const AttentionProblem &p, const Chunk &c,
                          const void *perKv) {
  return at(perKv, firstKvRow(p, c), p.elementBytes);
}

/// out [g x rows][keys] (fp32) = `stacked` rows [g x rows][D] (queries or
/// output gradients) times the KV head's keys or values, transposed.
template <typename Ops>
void rowsTimesKvT(Ops &ops, const AttentionProblem &p, const Chunk &c,
                  const void *stacked, const void *perKv, float *out) {
  RowMajorGemm gemm;
  gemm.transB = true;
  gemm.m = c.g * c.rows, gemm.n = c.keys, gemm.k = p.headDim;
  gemm.a = stacked, gemm.lda = p.headDim;
  gemm.b = kvRows(p, c, perKv), gemm.ldb = p.kvHeads * p.headDim;
  gemm.c = out, gemm.ldc = c.keys;
  ops.gemm(gemm);
}

/// out [g x rows][D] (storage type) = `perKey` [g x rows][keys] (P or dS)
/// times the KV head's values or keys.
template <typename Ops>
void scoresTimesKv(Ops &ops, const AttentionProblem &p, const Chunk &c,
                   const void *perKey, const void *perKv, void *out) {
  RowMajorGemm gemm;
  gemm.m = c.g * c.rows, gemm.n = p.headDim, gemm.k = c.keys;
  gemm.a = perKey, gemm.lda = c.keys;
  gemm.b = kvRows(p, c, perKv), gemm.ldb = p.kvHeads * p.headDim;
  gemm.c = out, gemm.ldc = p.headDim, gemm.floatResult = false;
  ops.gemm(gemm);
}

/// The chunk's rows of scores, as the row kernels see them: their
/// log-sum-exps in the problem's, or (none) in the scratch.
inline SoftmaxRows scoreRows(const AttentionProblem &p, const Chunk &c,
                             const ChunkScratch &scratch) {
  SoftmaxRows rows;
  rows.scores = scratch.scores;
  if (p.logSumExp) {
    rows.lse =
        p.logSumExp + (c.b * p.heads.count + c.h0) * p.seq + c.first;
    rows.lseHeadStride = p.seq;
  } else {
    rows.lse = scratch.lse, rows.lseHeadStride = c.rows;
  }
  rows.probabilities = scratch.probabilities;
  rows.probabilityGrad = scratch.probabilityGrad;
  rows.scoreGrad = scratch.scoreGrad;
  rows.segments = p.segments ? p.segments + c.b * p.seq : nullptr;
  rows.heads = c.g, rows.rows = c.rows, rows.keys = c.keys;
  rows.firstQuery = c.first, rows.firstKey = c.firstKey;
  rows.window = p.logits.window, rows.scale = p.logits.scale;
  rows.softcap = p.logits.softcap;
  return rows;
}

/// Calls `each(chunk, scratch)` for every chunk of every group (batch row
/// and KV head), after the chunk's queries are stacked and S = Q K^T and
/// P = softmax(S) are made: from the problem's log-sum-exps where the
/// gradient has them, else with them.
template <typename Ops, typename Each>
void forEachChunk(Ops &ops, const AttentionProblem &p, int64_t budgetBytes,
                  bool gradient, Each each) {
  bool keptStatistics = gradient && p.logSumExp;
  ops.forEachGroup(p.batch * p.kvHeads, [&](int64_t group) {
    int64_t b = group / p.kvHeads, kv = group % p.kvHeads;
    auto [h0, h1] = servedHeads(p.heads, p.kvHeads, kv);
    if (h1 == h0)
      return;
    ChunkScratch scratch = chunkScratch(ops, p, h1 - h0, budgetBytes, gradient);
    for (int64_t first = 0; first < p.seq; first += scratch.rows) {
      int64_t rows = std::min(scratch.rows, p.seq - first);
      // The keys from the first query's window to the last query.
      int64_t firstKey =
          p.logits.window > 0
              ? std::max<int64_t>(first - p.logits.window + 1, 0)
              : 0;
      Chunk chunk{b,     kv,   h0,       h1 - h0,
                  first, rows, firstKey, first + rows - firstKey};
      copyHeadRows(ops, p, chunk, p.q, scratch.queries, /*stack=*/true);
      rowsTimesKvT(ops, p, chunk, scratch.queries, p.k, scratch.scores);
      if (keptStatistics)
        ops.probabilityRows(scoreRows(p, chunk, scratch));
      else
        ops.softmaxRows(scoreRows(p, chunk, scratch));
      each(chunk, scratch);
    }
  });
}

} // namespace detail

/// out = softmax(scale Q K^T, causal, within segments and the window) V,
/// and each row's log-sum-exp into p.logSumExp (where it is not null).
template <typename Ops>
void chunkedAttention(Ops &ops, const AttentionProblem &p, void *out,
                      int64_t budgetBytes) {
  using namespace detail;
  forEachChunk(ops, p, budgetBytes, false,
               [&](const Chunk &c, const ChunkScratch &scratch) {
                 scoresTimesKv(ops, p, c, scratch.probabilities, p.v,
                               scratch.result);
                 copyHeadRows(ops, p, c, scratch.result, out, /*stack=*/false);
               });
}

/// dQ, dK, dV of chunkedAttention given dL/dout (`grad`), from the
/// forward's log-sum-exps (p.logSumExp), or recomputing them (null).
template <typename Ops>
void chunkedAttentionGrad(Ops &ops, const AttentionProblem &p, const void *grad,
                          void *queryGrad, void *keyGrad, void *valueGrad,
                          int64_t budgetBytes) {
  using namespace detail;
  int64_t D = p.headDim, KV = p.kvHeads;
  int64_t kvValues = p.batch * p.seq * KV * D;
  // Key and value gradients in fp32, [batch, seq, KV, D] like the results:
  // each group adds into its own KV head's columns.
  auto *keyAcc = static_cast<float *>(ops.scratch(5, kvValues * sizeof(float)));
  auto *valueAcc =
      static_cast<float *>(ops.scratch(6, kvValues * sizeof(float)));
  ops.zero(keyAcc, kvValues);
  ops.zero(valueAcc, kvValues);
  forEachChunk(
      ops, p, budgetBytes, true,
      [&](const Chunk &c, const ChunkScratch &scratch) {
        copyHeadRows(ops, p, c, grad, scratch.outputGrads, /*stack=*/true);
        rowsTimesKvT(ops, p, c, scratch.outputGrads, p.v,
                     scratch.probabilityGrad);         // dP
        ops.softmaxGradRows(scoreRows(p, c, scratch)); // dS
        scoresTimesKv(ops, p, c, scratch.scoreGrad, p.k, scratch.result);
        copyHeadRows(ops, p, c, scratch.result, queryGrad, false); // dQ
        // dV += P^T dO and dK += dS^T Q over the group's heads at once:
        // stacked, the heads' rows are one sum.
        RowMajorGemm dV;
        dV.transA = true;
        dV.m = c.keys, dV.n = D, dV.k = c.g * c.rows;
        dV.a = scratch.probabilities, dV.lda = c.keys;
        dV.b = scratch.outputGrads, dV.ldb = D;
        dV.c = valueAcc + firstKvRow(p, c), dV.ldc = KV * D;
        dV.accumulate = true;
        ops.gemm(dV);
        RowMajorGemm dK = dV;
        dK.a = scratch.scoreGrad, dK.b = scratch.queries;
        dK.c = keyAcc + firstKvRow(p, c);
        ops.gemm(dK);
      });
  ops.store(keyAcc, keyGrad, kvValues);
  ops.store(valueAcc, valueGrad, kvValues);
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H
