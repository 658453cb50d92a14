//===- CpuAttention.cpp - chunked attention on oneDNN GEMMs ---------------===//
//
// The cpu backend's operations for ChunkedAttention.h: fp32 storage, GEMMs
// through oneDNN, the row kernels vectorized (VectorMath.h); and the
// attention instructions' runners.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/ChunkedAttention.h"
#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/cpu/CpuOps.h"
#include "runtime/backend/cpu/VectorMath.h"
#include "runtime/backend/shapes/AttentionShape.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <omp.h>
#include <vector>

using namespace twill;

namespace {

struct CpuAttentionOps {
  // Measured on the bench/cpu_step.py job (seq 512, 2 threads, groups on
  // the threads), attention and its gradient over 3 steps: 64 rows
  // ~410 ms; 32: ~405, 128: ~550, 256: ~610.
  static constexpr int64_t kMaxChunkRows = 64;

  /// Each thread's scratch, kept from call to call: a step's attention
  /// calls would otherwise map and fault in fresh pages every time.
  void *scratch(int slot, int64_t bytes) {
    thread_local std::vector<std::vector<float>> slots;
    if ((int)slots.size() <= slot)
      slots.resize(slot + 1);
    slots[slot].resize((bytes + sizeof(float) - 1) / sizeof(float));
    return slots[slot].data();
  }

  /// Groups spread over the threads, each group's GEMMs and row kernels
  /// then on one thread: fewer, larger tasks than threading every small
  /// GEMM. With fewer groups than threads, the groups run in turn and each
  /// call inside uses every thread.
  template <typename Each> void forEachGroup(int64_t groups, Each each) {
    bool spread = groups >= omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) if (spread)
    for (int64_t group = 0; group < groups; ++group)
      each(group);
  }

  void gemm(const RowMajorGemm &call) { cpu::gemm(call); }

  void copyRows(const void *from, int64_t fromStride, void *to,
                int64_t toStride, int64_t rows, int64_t width) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<float *>(to) + r * toStride,
                  static_cast<const float *>(from) + r * fromStride,
                  width * sizeof(float));
  }

  void softmaxRows(const SoftmaxRows &rows) { cpu::softmaxRows(rows); }
  void probabilityRows(const SoftmaxRows &rows) { cpu::probabilityRows(rows); }
  void softmaxGradRows(const SoftmaxRows &rows) { cpu::softmaxGradRows(rows); }

  void zero(float *values, int64_t count) {
    std::memset(values, 0, count * sizeof(float));
  }
  void store(const float *from, void *to, int64_t count) {
    std::memcpy(to, from, count * sizeof(float));
  }
};

AttentionProblem problem(const float *q, const float *k, const float *v,
                         const int32_t *segments, float *logSumExp,
                         int64_t batch, int64_t seq, HeadBlock heads,
                         int64_t kvHeads, int64_t headDim,
                         const AttentionLogits &logits) {
  return {q,       k,     v,     segments,      batch,  seq,      kvHeads,
          headDim, heads, sizeof(float), logits, logSumExp};
}

} // namespace

/// One row of softmaxRows over the keys [0, end) it may see (from the
/// first of its window: keys after the query, or before its window, are
/// never visible): P and the row's log-sum-exp. With segments (packed
/// documents) only the query's segment is visible; the two cases are
/// separate loops so that each is vector code.
template <bool Segmented>
static inline float softmaxRow(const float *scores, float *p, int64_t end,
                               float scale, const int32_t *segments,
                               int32_t segment) {
  auto visible = [&](int64_t key) {
    return !Segmented || segments[key] == segment;
  };
  float best = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : best)
  for (int64_t j = 0; j < end; ++j)
    best = std::max(best, visible(j) ? scores[j] * scale : best);
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < end; ++j) {
    float e = cpu::expApprox(scores[j] * scale - best);
    p[j] = visible(j) ? e : 0.0f;
    total += p[j];
  }
  float inverse = 1.0f / total;
#pragma omp simd
  for (int64_t j = 0; j < end; ++j)
    p[j] *= inverse;
  return best + std::log(total);
}

/// One row of probabilityRows: P over the keys [0, end) from the row's
/// log-sum-exp, one pass.
template <bool Segmented>
static inline void probabilityRow(const float *scores, float *p, int64_t end,
                                  float scale, float lse,
                                  const int32_t *segments, int32_t segment) {
#pragma omp simd
  for (int64_t j = 0; j < end; ++j) {
    float e = cpu::expApprox(scores[j] * scale - lse);
    p[j] = !Segmented || segments[j] == segment ? e : 0.0f;
  }
}

/// Row `row` of softmaxRows (FromLse false: P and the row's log-sum-exp)
/// or of probabilityRows (true: P from the row's log-sum-exp). Inlined
/// into each of their clones, so that each target's vector code is its.
template <bool FromLse>
[[gnu::always_inline]] static inline void probabilityRowOf(const SoftmaxRows &s,
                                                           int64_t row) {
  int64_t query = s.firstQuery + row % s.rows;
  int64_t begin = s.visibleBegin(row), end = s.visibleEnd(row);
  const float *scores = s.scores + row * s.keys + begin;
  float *p = static_cast<float *>(s.probabilities) + row * s.keys;
  float rowScale = float(s.scale);
  if (s.softcap > 0) { // the capped logits first, then their softmax
    for (int64_t j = 0; j < end - begin; ++j)
      p[begin + j] = s.logit(scores[j]);
    scores = p + begin, rowScale = 1;
  }
  const int32_t *segments =
      s.segments ? s.segments + s.firstKey + begin : nullptr;
  int32_t segment = s.segments ? s.segments[query] : 0;
  if constexpr (FromLse) {
    if (segments)
      probabilityRow<true>(scores, p + begin, end - begin, rowScale,
                           s.lseOf(row), segments, segment);
    else
      probabilityRow<false>(scores, p + begin, end - begin, rowScale,
                            s.lseOf(row), nullptr, 0);
  } else {
    s.lseOf(row) =
        segments ? softmaxRow<true>(scores, p + begin, end - begin, rowScale,
                                    segments, segment)
                 : softmaxRow<false>(scores, p + begin, end - begin, rowScale,
                                     nullptr, 0);
  }
  std::fill(p, p + begin, 0.0f);
  std::fill(p + end, p + s.keys, 0.0f);
}

TWILL_CPU_CLONES void cpu::softmaxRows(const SoftmaxRows &s) {
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t row = 0; row < s.heads * s.rows; ++row)
    probabilityRowOf<false>(s, row);
}

TWILL_CPU_CLONES void cpu::probabilityRows(const SoftmaxRows &s) {
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t row = 0; row < s.heads * s.rows; ++row)
    probabilityRowOf<true>(s, row);
}

/// dS = P (dP - rowsum(P dP)) scale, from the P softmaxRows made for this
/// chunk (zero where a key is not visible, so dS is too).
TWILL_CPU_CLONES void cpu::softmaxGradRows(const SoftmaxRows &s) {
  float scale = float(s.scale);
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t row = 0; row < s.heads * s.rows; ++row) {
    int64_t begin = s.visibleBegin(row), end = s.visibleEnd(row);
    const float *p = static_cast<const float *>(s.probabilities) + row * s.keys;
    const float *dP = s.probabilityGrad + row * s.keys;
    float *dS = static_cast<float *>(s.scoreGrad) + row * s.keys;
    float rowDot = 0; // sum_j p_j dP_j = dO . O
#pragma omp simd reduction(+ : rowDot)
    for (int64_t j = begin; j < end; ++j)
      rowDot += p[j] * dP[j];
    if (s.softcap > 0) { // through the cap's tanh
      const float *scores = s.scores + row * s.keys;
      for (int64_t j = begin; j < end; ++j)
        dS[j] = p[j] * (dP[j] - rowDot) * s.logitSlope(scores[j]);
    } else {
#pragma omp simd
      for (int64_t j = begin; j < end; ++j)
        dS[j] = p[j] * (dP[j] - rowDot) * scale;
    }
    std::fill(dS, dS + begin, 0.0f);
    std::fill(dS + end, dS + s.keys, 0.0f);
  }
}

void cpu::attention(const float *q, const float *k, const float *v,
                    const int32_t *segments, float *out, float *logSumExp,
                    int64_t batch, int64_t seq, HeadBlock heads,
                    int64_t kvHeads, int64_t headDim,
                    const AttentionLogits &logits, int64_t budgetBytes) {
  CpuAttentionOps ops;
  chunkedAttention(ops,
                   problem(q, k, v, segments, logSumExp, batch, seq, heads,
                           kvHeads, headDim, logits),
                   out, budgetBytes);
}

void cpu::attentionGrad(const float *q, const float *k, const float *v,
                        const float *logSumExp, const float *grad,
                        const int32_t *segments, float *queryGrad,
                        float *keyGrad, float *valueGrad, int64_t batch,
                        int64_t seq, HeadBlock heads, int64_t kvHeads,
                        int64_t headDim, const AttentionLogits &logits,
                        int64_t budgetBytes) {
  CpuAttentionOps ops;
  // Read, never written: the problem's pointer serves both directions.
  chunkedAttentionGrad(ops,
                       problem(q, k, v, segments,
                               const_cast<float *>(logSumExp), batch, seq,
                               heads, kvHeads, headDim, logits),
                       grad, queryGrad, keyGrad, valueGrad, budgetBytes);
}

llvm::Error cpu::runAttention(const InstructionView &in) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, false);
  if (!shape)
    return shape.takeError();
  cpu::attention(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                 shape->segments(in), in.data<float>(shape->firstResult),
                 shape->logSumExp(in, false), shape->batch, shape->seq,
                 shape->heads, shape->kvHeads, shape->headDim, shape->logits);
  return llvm::Error::success();
}

llvm::Error cpu::runAttentionGrad(const InstructionView &in) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, true);
  if (!shape)
    return shape.takeError();
  llvm::Expected<bool> recompute = recomputesStatistics();
  if (!recompute)
    return recompute.takeError();
  int first = shape->firstResult;
  cpu::attentionGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                     *recompute ? nullptr : shape->logSumExp(in, true),
                     in.data<float>(AttentionShape::kGrad), shape->segments(in),
                     in.data<float>(first), in.data<float>(first + 1),
                     in.data<float>(first + 2), shape->batch, shape->seq,
                     shape->heads, shape->kvHeads, shape->headDim,
                     shape->logits);
  return llvm::Error::success();
}
