//===- CpuAttention.cpp - chunked attention on OpenBLAS -------------------===//
//
// The cpu backend's operations for ChunkedAttention.h: fp32 storage, GEMMs
// through OpenBLAS, row softmax in double for the statistics.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/ChunkedAttention.h"
#include "runtime/backend/cpu/CpuKernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace twill;

namespace {

struct CpuAttentionOps {
  std::vector<std::vector<float>> slots;

  void *scratch(int slot, int64_t bytes) {
    if ((int)slots.size() <= slot)
      slots.resize(slot + 1);
    slots[slot].resize((bytes + sizeof(float) - 1) / sizeof(float));
    return slots[slot].data();
  }

  void gemm(const RowMajorGemm &call) { cpu::gemm(call); }

  void softmaxRows(const SoftmaxRows &rows) { cpu::softmaxRows(rows); }
  void softmaxGradRows(const SoftmaxRows &rows) { cpu::softmaxGradRows(rows); }

  void zero(float *values, int64_t count) {
    std::memset(values, 0, count * sizeof(float));
  }
  void store(const float *from, void *to, int64_t count) {
    std::memcpy(to, from, count * sizeof(float));
  }
};

AttentionProblem problem(const float *q, const float *k, const float *v,
                         const int32_t *segments, int64_t batch, int64_t seq,
                         HeadBlock heads, int64_t kvHeads, int64_t headDim,
                         double scale) {
  return {q,       k,       v,     segments, batch,        seq,
          kvHeads, headDim, heads, scale,    sizeof(float)};
}

} // namespace

void cpu::softmaxRows(const SoftmaxRows &s) {
#pragma omp parallel for
  for (int64_t row = 0; row < s.heads * s.rows; ++row) {
    int64_t query = s.firstQuery + row % s.rows;
    const float *scores = s.scores + row * s.keys;
    float *p = static_cast<float *>(s.probabilities) + row * s.keys;
    double best = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < s.keys; ++j)
      if (s.visible(query, j))
        best = std::max(best, scores[j] * s.scale);
    double total = 0;
    for (int64_t j = 0; j < s.keys; ++j)
      total += s.visible(query, j) ? std::exp(scores[j] * s.scale - best) : 0;
    double lse = best + std::log(total);
    for (int64_t j = 0; j < s.keys; ++j)
      p[j] = s.visible(query, j) ? float(std::exp(scores[j] * s.scale - lse))
                                 : 0.0f;
    s.lse[row] = float(lse);
  }
}

void cpu::softmaxGradRows(const SoftmaxRows &s) {
#pragma omp parallel for
  for (int64_t row = 0; row < s.heads * s.rows; ++row) {
    int64_t query = s.firstQuery + row % s.rows;
    const float *scores = s.scores + row * s.keys;
    const float *dP = s.probabilityGrad + row * s.keys;
    float *dS = static_cast<float *>(s.scoreGrad) + row * s.keys;
    auto probability = [&](int64_t j) {
      return s.visible(query, j)
                 ? std::exp(double(scores[j]) * s.scale - s.lse[row])
                 : 0.0;
    };
    double rowDot = 0; // sum_j p_j dP_j = dO . O
    for (int64_t j = 0; j < s.keys; ++j)
      rowDot += probability(j) * dP[j];
    for (int64_t j = 0; j < s.keys; ++j)
      dS[j] = float(probability(j) * (dP[j] - rowDot) * s.scale);
  }
}

void cpu::attention(const float *q, const float *k, const float *v,
                    const int32_t *segments, float *out, int64_t batch,
                    int64_t seq, HeadBlock heads, int64_t kvHeads,
                    int64_t headDim, double scale, int64_t budgetBytes) {
  CpuAttentionOps ops;
  chunkedAttention(
      ops,
      problem(q, k, v, segments, batch, seq, heads, kvHeads, headDim, scale),
      out, budgetBytes);
}

void cpu::attentionGrad(const float *q, const float *k, const float *v,
                        const float *grad, const int32_t *segments,
                        float *queryGrad, float *keyGrad, float *valueGrad,
                        int64_t batch, int64_t seq, HeadBlock heads,
                        int64_t kvHeads, int64_t headDim, double scale,
                        int64_t budgetBytes) {
  CpuAttentionOps ops;
  chunkedAttentionGrad(
      ops,
      problem(q, k, v, segments, batch, seq, heads, kvHeads, headDim, scale),
      grad, queryGrad, keyGrad, valueGrad, budgetBytes);
}
