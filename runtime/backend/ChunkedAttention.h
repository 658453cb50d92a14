//===- ChunkedAttention.h - attention as GEMMs over query chunks -*- C++ -*-===//
//
// Causal grouped-query attention (and its gradient) as a schedule of
// strided-batched GEMMs and two row kernels, run chunk of queries by chunk:
// the scores of one chunk against the keys it can see (keys 0 .. its last
// query: causality halves the work) are the only scores that ever exist, so
// memory is bounded by the chunk size, never seq^2 x heads, and every FLOP
// of QK^T, PV and their gradients runs in the backend's GEMM (OpenBLAS,
// cuBLAS on tensor cores). One schedule for every backend: the cpu backend
// checks it against the reference and PyTorch, the cuda backend runs the
// same calls.
//
// The gradient recomputes the chunk's softmax (from its scores and row
// log-sum-exp), so the forward keeps nothing; key and value gradients of a
// KV head accumulate in fp32 over chunks and query heads, in a fixed order.
//
// Values are [batch, seq, heads, headDim] of the backend's storage type;
// scores, their gradients and the accumulators are fp32.
//
// `Ops` supplies (duck-typed):
//   void gemm(const AttentionGemm &);
//   void softmaxRows(const SoftmaxRows &);      // scores -> P (storage), lse
//   void softmaxGradRows(const SoftmaxRows &);  // scores, lse, dP -> dS
//   void zero(float *, int64_t count);
//   void store(const float *from, void *to, int64_t count); // to storage
//   void *scratch(int slot, int64_t bytes);
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H
#define TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H

#include "runtime/backend/Blocks.h"

#include <algorithm>
#include <cstdint>

// The row kernels test visibility on the device too.
#ifdef __CUDACC__
#define TWILL_HOST_DEVICE __host__ __device__
#else
#define TWILL_HOST_DEVICE
#endif

namespace twill {

/// Row-major C = op(A) op(B) (+ C when `accumulate`), `batch` times, each
/// operand advancing by its stride (in elements); A and B hold the storage
/// type, C fp32 when `floatResult`, else the storage type.
struct AttentionGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  void *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t batch = 1;
  bool accumulate = false, floatResult = true;
};

/// Rows of scores for `heads` query heads x `rows` queries (query i0 + r)
/// against keys 0 .. keys-1, each row `keys` long, head after head. A key is
/// visible when it is not after the query and (with segments) in the
/// query's segment.
struct SoftmaxRows {
  const float *scores = nullptr; // [heads][rows][keys]
  float *lse = nullptr;          // [heads][rows]: log-sum-exp of scaled rows
  void *probabilities = nullptr; // softmaxRows: P, storage type
  const float *probabilityGrad = nullptr; // softmaxGradRows: dP
  void *scoreGrad = nullptr;     // softmaxGradRows: dS (scaled), storage type
  const int32_t *segments = nullptr; // this batch row's, or null
  int64_t heads = 0, rows = 0, keys = 0, firstQuery = 0;
  double scale = 1;

  TWILL_HOST_DEVICE bool visible(int64_t query, int64_t key) const {
    return key <= query && (!segments || segments[key] == segments[query]);
  }
};

struct AttentionProblem {
  const void *q, *k, *v;
  const int32_t *segments; // [batch, seq] or null
  int64_t batch, seq, kvHeads, headDim;
  HeadBlock heads;
  double scale;
  int elementBytes; // of the storage type
};

namespace detail {

/// The local query heads [begin, end) that KV head `kvHead` serves.
inline std::pair<int64_t, int64_t> servedHeads(const HeadBlock &heads,
                                               int64_t kvHeads,
                                               int64_t kvHead) {
  int64_t group = heads.total / kvHeads;
  int64_t begin = std::max<int64_t>(kvHead * group - heads.first, 0);
  int64_t end = std::min<int64_t>((kvHead + 1) * group - heads.first,
                                  heads.count);
  return {begin, std::max(begin, end)};
}

/// Queries per chunk: as many as keep one chunk's fp32 scores of a KV
/// group's heads (and what lives beside them) within `budgetBytes`.
inline int64_t chunkRows(const AttentionProblem &p, int64_t groupHeads,
                         int64_t budgetBytes) {
  int64_t perRow = std::max<int64_t>(groupHeads, 1) * p.seq *
                   (2 * sizeof(float) + 2 * p.elementBytes);
  return std::clamp<int64_t>(budgetBytes / std::max<int64_t>(perRow, 1), 1,
                             p.seq);
}

inline const char *at(const void *base, int64_t elements, int bytes) {
  return static_cast<const char *>(base) + elements * bytes;
}
inline char *at(void *base, int64_t elements, int bytes) {
  return static_cast<char *>(base) + elements * bytes;
}

/// S = Q K^T for the chunk's queries and every key up to its last, for the
/// group's heads, and its softmax P (and lse).
template <typename Ops>
void chunkSoftmax(Ops &ops, const AttentionProblem &p, int64_t b, int64_t kv,
                  int64_t h0, int64_t g, int64_t i0, int64_t rows,
                  float *scores, float *lse, void *probabilities) {
  int64_t keys = i0 + rows, H = p.heads.count, D = p.headDim;
  int e = p.elementBytes;
  AttentionGemm s;
  s.transB = true;
  s.m = rows, s.n = keys, s.k = D;
  s.a = at(p.q, ((b * p.seq + i0) * H + h0) * D, e);
  s.lda = H * D, s.strideA = D;
  s.b = at(p.k, (b * p.seq * p.kvHeads + kv) * D, e);
  s.ldb = p.kvHeads * D, s.strideB = 0;
  s.c = scores, s.ldc = keys, s.strideC = rows * keys;
  s.batch = g;
  ops.gemm(s);
  SoftmaxRows softmax;
  softmax.scores = scores, softmax.lse = lse;
  softmax.probabilities = probabilities;
  softmax.segments = p.segments ? p.segments + b * p.seq : nullptr;
  softmax.heads = g, softmax.rows = rows, softmax.keys = keys;
  softmax.firstQuery = i0, softmax.scale = p.scale;
  ops.softmaxRows(softmax);
}

} // namespace detail

/// out = softmax(scale Q K^T, causal, within segments) V.
template <typename Ops>
void chunkedAttention(Ops &ops, const AttentionProblem &p, void *out,
                      int64_t budgetBytes) {
  using namespace detail;
  int64_t H = p.heads.count, D = p.headDim, seq = p.seq;
  int e = p.elementBytes;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t kv = 0; kv < p.kvHeads; ++kv) {
      auto [h0, h1] = servedHeads(p.heads, p.kvHeads, kv);
      int64_t g = h1 - h0;
      if (g == 0)
        continue;
      int64_t chunk = chunkRows(p, g, budgetBytes);
      auto *scores = static_cast<float *>(
          ops.scratch(0, g * chunk * seq * sizeof(float)));
      auto *lse = static_cast<float *>(ops.scratch(1, g * chunk * sizeof(float)));
      void *probabilities = ops.scratch(2, g * chunk * seq * e);
      for (int64_t i0 = 0; i0 < seq; i0 += chunk) {
        int64_t rows = std::min(chunk, seq - i0), keys = i0 + rows;
        chunkSoftmax(ops, p, b, kv, h0, g, i0, rows, scores, lse,
                     probabilities);
        AttentionGemm o; // O = P V
        o.m = rows, o.n = D, o.k = keys;
        o.a = probabilities, o.lda = keys, o.strideA = rows * keys;
        o.b = at(p.v, (b * seq * p.kvHeads + kv) * D, e);
        o.ldb = p.kvHeads * D, o.strideB = 0;
        o.c = at(out, ((b * seq + i0) * H + h0) * D, e);
        o.ldc = H * D, o.strideC = D;
        o.batch = g, o.floatResult = false;
        ops.gemm(o);
      }
    }
}

/// dQ, dK, dV of chunkedAttention given dL/dout (`grad`).
template <typename Ops>
void chunkedAttentionGrad(Ops &ops, const AttentionProblem &p,
                          const void *grad, void *queryGrad, void *keyGrad,
                          void *valueGrad, int64_t budgetBytes) {
  using namespace detail;
  int64_t H = p.heads.count, D = p.headDim, seq = p.seq, KV = p.kvHeads;
  int e = p.elementBytes;
  // Key and value gradients of one batch row, all KV heads, in fp32.
  auto *keyAcc =
      static_cast<float *>(ops.scratch(5, seq * KV * D * sizeof(float)));
  auto *valueAcc =
      static_cast<float *>(ops.scratch(6, seq * KV * D * sizeof(float)));
  for (int64_t b = 0; b < p.batch; ++b) {
    ops.zero(keyAcc, seq * KV * D);
    ops.zero(valueAcc, seq * KV * D);
    for (int64_t kv = 0; kv < KV; ++kv) {
      auto [h0, h1] = servedHeads(p.heads, KV, kv);
      int64_t g = h1 - h0;
      if (g == 0)
        continue;
      int64_t chunk = chunkRows(p, g, budgetBytes);
      auto *scores = static_cast<float *>(
          ops.scratch(0, g * chunk * seq * sizeof(float)));
      auto *lse = static_cast<float *>(ops.scratch(1, g * chunk * sizeof(float)));
      void *probabilities = ops.scratch(2, g * chunk * seq * e);
      auto *probabilityGrad = static_cast<float *>(
          ops.scratch(3, g * chunk * seq * sizeof(float)));
      void *scoreGrad = ops.scratch(4, g * chunk * seq * e);
      const char *keys0 = at(p.k, (b * seq * KV + kv) * D, e);
      const char *values0 = at(p.v, (b * seq * KV + kv) * D, e);
      for (int64_t i0 = 0; i0 < seq; i0 += chunk) {
        int64_t rows = std::min(chunk, seq - i0), keys = i0 + rows;
        int64_t firstRow = ((b * seq + i0) * H + h0) * D;
        chunkSoftmax(ops, p, b, kv, h0, g, i0, rows, scores, lse,
                     probabilities);
        AttentionGemm dP; // dP = dO V^T
        dP.transB = true;
        dP.m = rows, dP.n = keys, dP.k = D;
        dP.a = at(grad, firstRow, e), dP.lda = H * D, dP.strideA = D;
        dP.b = values0, dP.ldb = KV * D, dP.strideB = 0;
        dP.c = probabilityGrad, dP.ldc = keys, dP.strideC = rows * keys;
        dP.batch = g;
        ops.gemm(dP);
        SoftmaxRows rowsGrad;
        rowsGrad.scores = scores, rowsGrad.lse = lse;
        rowsGrad.probabilityGrad = probabilityGrad;
        rowsGrad.scoreGrad = scoreGrad;
        rowsGrad.segments = p.segments ? p.segments + b * seq : nullptr;
        rowsGrad.heads = g, rowsGrad.rows = rows, rowsGrad.keys = keys;
        rowsGrad.firstQuery = i0, rowsGrad.scale = p.scale;
        ops.softmaxGradRows(rowsGrad);
        AttentionGemm dQ; // dQ = dS K: each query row in one chunk only
        dQ.m = rows, dQ.n = D, dQ.k = keys;
        dQ.a = scoreGrad, dQ.lda = keys, dQ.strideA = rows * keys;
        dQ.b = keys0, dQ.ldb = KV * D, dQ.strideB = 0;
        dQ.c = at(queryGrad, firstRow, e), dQ.ldc = H * D, dQ.strideC = D;
        dQ.batch = g, dQ.floatResult = false;
        ops.gemm(dQ);
        // dV += P^T dO and dK += dS^T Q, head by head: every head of the
        // group adds into the same KV head.
        for (int64_t x = 0; x < g; ++x) {
          AttentionGemm dV;
          dV.transA = true;
          dV.m = keys, dV.n = D, dV.k = rows;
          dV.a = at(probabilities, x * rows * keys, e), dV.lda = keys;
          dV.b = at(grad, firstRow + x * D, e), dV.ldb = H * D;
          dV.c = valueAcc + kv * D, dV.ldc = KV * D;
          dV.accumulate = true;
          ops.gemm(dV);
          AttentionGemm dK = dV;
          dK.a = at(scoreGrad, x * rows * keys, e);
          dK.b = at(p.q, firstRow + x * D, e);
          dK.c = keyAcc + kv * D;
          ops.gemm(dK);
        }
      }
    }
    ops.store(keyAcc, at(keyGrad, b * seq * KV * D, e), seq * KV * D);
    ops.store(valueAcc, at(valueGrad, b * seq * KV * D, e), seq * KV * D);
  }
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_CHUNKEDATTENTION_H
