//===- CpuKernels.cpp - fp32 reference kernels ----------------------------===//

#include "runtime/backend/cpu/CpuKernels.h"

#include "runtime/backend/RopeFrequencies.h"
#include "runtime/backend/cpu/VectorMath.h"
#include "support/ElementMath.h"

#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace twill;

/// Every token id is in the vocabulary: ids come from data.
static llvm::Error checkIds(const int32_t *ids, int64_t count, int64_t vocab) {
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("token id {0} at position {1} is outside the "
                        "vocabulary [0, {2})",
                        ids[i], i, vocab));
  return llvm::Error::success();
}

llvm::Error cpu::embedding(const float *table, int64_t vocab, int64_t dim,
                           const int32_t *ids, int64_t count, float *out,
                           std::optional<int64_t> firstRow) {
  if (!firstRow) {
    if (llvm::Error error = checkIds(ids, count, vocab))
      return error;
  }
  int64_t first = firstRow.value_or(0);
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = int64_t(ids[i]) - first;
    if (row >= 0 && row < vocab)
      std::memcpy(out + i * dim, table + row * dim, dim * sizeof(float));
    else
      std::fill(out + i * dim, out + (i + 1) * dim, 0.0f);
  }
  return llvm::Error::success();
}

void cpu::dequantizeNf4(const uint8_t *codes, const uint8_t *absmax,
                        const float *nested, float offset,
                        const nf4::Geometry &g, float *out) {
  static const nf4::Tables tables = nf4::tables();
  int64_t blocks = g.columns / g.blockSize;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < g.rows; ++r) {
    float *row = out + r * g.columns;
    if (g.firstRow + r >= g.wholeRows) {
      std::fill(row, row + g.columns, 0.0f);
      continue;
    }
    const uint8_t *rowCodes = codes + r * (g.columns / 2);
    for (int64_t b = 0; b < blocks; ++b) {
      float scale = nf4::rowBlockScale(tables, absmax, nested, offset, g, r, b);
      for (int64_t c = b * g.blockSize; c < (b + 1) * g.blockSize; ++c)
        row[c] = tables.levels[nf4::codeAt(rowCodes, c)] * scale;
    }
  }
}

void cpu::dequantizeFp8(const uint8_t *values, const float *scales,
                        int64_t rows, int64_t columns, float *out) {
  static const fp8::Table table = fp8::table();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      out[r * columns + c] = table.values[values[r * columns + c]] * scales[r];
}

void cpu::roundToFp8(const float *in, int64_t rows, int64_t columns,
                     int64_t block, float *out) {
  int64_t blocks = (columns + block - 1) / block;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows * blocks; ++i) {
    int64_t first = (i / blocks) * columns + (i % blocks) * block;
    int64_t count = std::min(block, columns - (i % blocks) * block);
    float amax = 0;
    for (int64_t c = 0; c < count; ++c)
      amax = std::max(amax, std::fabs(in[first + c]));
    float scale = fp8::blockScale(amax);
    for (int64_t c = 0; c < count; ++c)
      out[first + c] = fp8::roundInBlock(in[first + c], scale);
  }
}

void cpu::panelProduct(
    int64_t rows, int64_t columns, int64_t panelRows, const float *addend,
    float *out, int64_t count,
    llvm::function_ref<void(int64_t, int64_t, float *)> form,
    llvm::function_ref<RowMajorGemm(int64_t, int64_t, const float *)> gemmOf) {
  if (addend)
    copy(addend, out, count);
  else
    fill(out, count, 0.0);
  std::vector<float> panel(std::min(panelRows, rows) * columns);
  for (int64_t first = 0; first < rows; first += panelRows) {
    int64_t n = std::min(panelRows, rows - first);
    form(first, n, panel.data());
    gemm(gemmOf(first, n, panel.data()));
  }
}

void cpu::gemm(const RowMajorGemm &g) {
  auto *a = static_cast<const float *>(g.a);
  auto *b = static_cast<const float *>(g.b);
  auto *c = static_cast<float *>(g.c);
  if (g.m == 0 || g.n == 0)
    return;
  if (g.k == 0) { // an empty sum (BLAS refuses its leading dims): C or zeros
    if (!g.accumulate)
      for (int64_t i = 0; i < g.batch; ++i)
        for (int64_t row = 0; row < g.m; ++row)
          std::fill_n(c + i * g.strideC + row * g.ldc, g.n, 0.0f);
    return;
  }
  for (int64_t i = 0; i < g.batch; ++i) {
    dnnl_status_t status =
        dnnl_sgemm(g.transA ? 'T' : 'N', g.transB ? 'T' : 'N', g.m, g.n, g.k,
                   g.alpha, a + i * g.strideA, g.lda, b + i * g.strideB, g.ldb,
                   g.accumulate ? 1.0f : 0.0f, c + i * g.strideC, g.ldc);
    // The compiler's shapes make every call valid; one that is not is a
    // bug, never bad input.
    if (status != dnnl_success)
      llvm::report_fatal_error(llvm::Twine(
          llvm::formatv("oneDNN refused a {0}x{1}x{2} GEMM (status {3})", g.m,
                        g.n, g.k, int(status))));
  }
}

/// 1 / sqrt(mean(x^2) + eps) of one row.
static inline double inverseRms(const float *row, int64_t dim, double eps) {
  double sumSquares =
      cpu::sumInBlocks(dim, [&](int64_t i) { return row[i] * row[i]; });
  return 1.0 / std::sqrt(sumSquares / dim + eps);
}

TWILL_CPU_CLONES void cpu::rmsNorm(const float *x, const float *weight,
                                   float *out, int64_t rows, int64_t dim,
                                   double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const float *in = x + row * dim;
    float inverse = float(inverseRms(in, dim, eps));
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i)
      out[row * dim + i] = weight[i] * (in[i] * inverse);
  }
}

void cpu::rope(const float *x, const int32_t *positions, float *out,
               int64_t tokens, int64_t heads, int64_t headDim, double theta,
               const RopeFrequencyScaling &scaling, bool inverse) {
  std::vector<double> frequencies = ropeFrequencies(headDim, theta, scaling);
  int64_t half = headDim / 2;
#pragma omp parallel for
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> cosines(half), sines(half);
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(positions[t]) * frequencies[i];
      cosines[i] = float(std::cos(angle));
      sines[i] = float(inverse ? -std::sin(angle) : std::sin(angle));
    }
    for (int64_t h = 0; h < heads; ++h) {
      const float *in = x + (t * heads + h) * headDim;
      float *result = out + (t * heads + h) * headDim;
      for (int64_t i = 0; i < half; ++i) {
        float first = in[i], second = in[i + half];
        result[i] = first * cosines[i] - second * sines[i];
        result[i + half] = second * cosines[i] + first * sines[i];
      }
    }
  }
}

/// The element math's exponential on the cpu: one that vectorizes.
static constexpr auto kExp = [](float x) { return cpu::expApprox(x); };

TWILL_CPU_CLONES void cpu::swiglu(const float *gate, const float *up,
                                  float *out, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    out[i] = math::swiglu(gate[i], up[i], kExp);
}

TWILL_CPU_CLONES void cpu::geglu(const float *gate, const float *up, float *out,
                                 int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    out[i] = math::geglu(gate[i], up[i], kExp);
}

TWILL_CPU_CLONES void cpu::sigmoidGate(const float *gate, const float *up,
                                       float *out, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    out[i] = math::sigmoidGate(gate[i], up[i], kExp);
}

void cpu::copy(const float *from, float *to, int64_t count) {
  if (from == to)
    return;
  constexpr int64_t kBlock = 1 << 16; // values: 256 KiB a memcpy
#pragma omp parallel for schedule(static)
  for (int64_t first = 0; first < count; first += kBlock)
    std::memcpy(to + first, from + first,
                std::min(kBlock, count - first) * sizeof(float));
}

void cpu::add(const float *lhs, const float *rhs, float *out, int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = lhs[i] + rhs[i];
}

void cpu::mul(const float *lhs, const float *rhs, float *out, int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = lhs[i] * rhs[i];
}

void cpu::div(const float *lhs, const float *rhs, float *out, int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = lhs[i] / rhs[i];
}

void cpu::scale(const float *x, double factor, float *out, int64_t count) {
  float f = float(factor);
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = x[i] * f;
}

void cpu::softcap(const float *x, double cap, float *out, int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = math::softcap(x[i], float(cap));
}

void cpu::softcapGrad(const float *x, const float *grad, double cap, float *out,
                      int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = math::softcapGrad(x[i], grad[i], float(cap));
}

void cpu::rowSumSquares(const float *x, int64_t rows, int64_t columns,
                        float *out) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < columns; ++c)
      sum += double(x[r * columns + c]) * x[r * columns + c];
    out[r] = float(sum);
  }
}

void cpu::scaleColumns(const float *x, const float *scale, int64_t rows,
                       int64_t columns, float *out) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      out[r * columns + c] = x[r * columns + c] * scale[c];
}

/// out[c] = sum over r of x[r, c] (times weight[r, c], if given), summed
/// in double: a thread per block of 64 columns walks the rows, reading each
/// row's part of the block in order.
static void columnSumsOf(const float *x, const float *weight, int64_t rows,
                         int64_t columns, float *out) {
  constexpr int64_t kBlock = 64;
#pragma omp parallel for
  for (int64_t first = 0; first < columns; first += kBlock) {
    int64_t width = std::min(kBlock, columns - first);
    double sums[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float *v = x + r * columns + first;
      if (!weight) {
        for (int64_t c = 0; c < width; ++c)
          sums[c] += v[c];
        continue;
      }
      const float *w = weight + r * columns + first;
      for (int64_t c = 0; c < width; ++c)
        sums[c] += double(w[c]) * v[c];
    }
    for (int64_t c = 0; c < width; ++c)
      out[first + c] = float(sums[c]);
  }
}

void cpu::scaleColumnsGrad(const float *x, const float *scale,
                           const float *grad, int64_t rows, int64_t columns,
                           float *inputGrad, float *scaleGrad) {
  scaleColumns(grad, scale, rows, columns, inputGrad);
  columnSumsOf(x, grad, rows, columns, scaleGrad);
}

void cpu::addColumns(const float *x, const float *bias, int64_t rows,
                     int64_t columns, float *out) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      out[r * columns + c] = x[r * columns + c] + bias[c];
}

void cpu::columnSums(const float *x, int64_t rows, int64_t columns,
                     float *out) {
  columnSumsOf(x, /*weight=*/nullptr, rows, columns, out);
}

// Philox's rounds run a vector of groups at a time: built for the widest
// vectors the machine has (GCC's function clones, chosen when it loads).
__attribute__((target_clones("avx512f", "avx2", "default"))) void
cpu::dropout(const float *x, const int32_t *tokenIndex, int64_t tokens,
                  int64_t features, int64_t firstFeature,
                  const DropoutKey &key, double rate, float *out) {
  float scale = float(1.0 / (1.0 - rate));
#pragma omp parallel for
  for (int64_t row = 0; row < tokens; ++row) {
    uint32_t token = uint32_t(tokenIndex[row]);
    const float *in = x + row * features;
    float *result = out + row * features;
    // One Philox call for each group of four global features, a vector
    // of kDropoutLanes groups at a time.
    unsigned keeps[kDropoutLanes];
    int64_t groups = dropoutGroups(firstFeature, features);
    for (int64_t g = 0; g < groups; ++g) {
      int64_t group = firstFeature / 4 + g;
      if (g % kDropoutLanes == 0)
        dropoutKeepsLanes(key, token, uint32_t(group), keeps);
      unsigned bits = keeps[g % kDropoutLanes];
      for (int lane = 0; lane < 4; ++lane) {
        int64_t column = 4 * group + lane - firstFeature;
        if (column >= 0 && column < features)
          result[column] = (bits >> lane) & 1 ? in[column] * scale : 0.0f;
      }
    }
  }
}

/// Every label is in the vocabulary or the ignore index.
static llvm::Error checkLabels(const int32_t *labels, int64_t rows,
                               int64_t vocab, int64_t ignoreIndex) {
  for (int64_t row = 0; row < rows; ++row)
    if (labels[row] != ignoreIndex && (labels[row] < 0 || labels[row] >= vocab))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("label {0} at position {1} is outside the vocabulary "
                        "[0, {2}) and is not the ignore index {3}",
                        labels[row], row, vocab, ignoreIndex));
  return llvm::Error::success();
}

/// Per-row max and sum of exp(logit - max) over the vocab, and the label's
/// logit, over every rank's block: the softmax of a vocab-parallel row.
struct LogitRowStats {
  std::vector<double> max, sum, target;
};

/// The largest of `count` logits (-inf for none).
TWILL_CPU_CLONES static float rowMax(const float *z, int64_t count) {
  float best = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : best)
  for (int64_t i = 0; i < count; ++i)
    best = std::max(best, z[i]);
  return best;
}

/// sum exp(z - max) over `count` logits.
TWILL_CPU_CLONES static double rowExpSum(const float *z, int64_t count,
                                         float max) {
  return cpu::sumInBlocks(
      count, [&](int64_t i) { return cpu::expApprox(z[i] - max); });
}

static llvm::Expected<LogitRowStats>
logitRowStats(const float *logits, const int32_t *labels, int64_t rows,
              VocabBlock block, int64_t ignoreIndex, cpu::RowReduce reduce) {
  if (llvm::Error error = checkLabels(labels, rows, block.vocab, ignoreIndex))
    return std::move(error);
  // Padding columns past the vocab are not logits.
  int64_t columns =
      std::clamp<int64_t>(block.vocab - block.first, 0, block.columns);
  LogitRowStats stats{
      std::vector<double>(rows, -std::numeric_limits<double>::infinity()),
      std::vector<double>(rows, 0.0), std::vector<double>(rows, 0.0)};
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const float *z = logits + row * block.columns;
    if (columns > 0)
      stats.max[row] = rowMax(z, columns);
    int64_t label = int64_t(labels[row]) - block.first;
    if (labels[row] != ignoreIndex && label >= 0 && label < columns)
      stats.target[row] = z[label];
  }
  if (llvm::Error error = reduce(stats.max, /*max=*/true))
    return std::move(error);
    // Every rank's max is one of the float logits: exact as a float.
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row)
    stats.sum[row] =
        rowExpSum(logits + row * block.columns, columns, float(stats.max[row]));
  if (llvm::Error error = reduce(stats.sum, /*max=*/false))
    return std::move(error);
  if (llvm::Error error = reduce(stats.target, /*max=*/false))
    return std::move(error);
  return stats;
}

/// Adds the loss of `rows` rows to their sums (`buckets`: one, or their
/// rows' sequences') in row order (deterministic), and counts them.
static llvm::Error addRowLosses(const float *logits, const int32_t *labels,
                                int64_t rows, VocabBlock block,
                                int64_t ignoreIndex, cpu::RowReduce reduce,
                                const LossBuckets &buckets, double *totals,
                                int64_t *counted) {
  llvm::Expected<LogitRowStats> stats =
      logitRowStats(logits, labels, rows, block, ignoreIndex, reduce);
  if (!stats)
    return stats.takeError();
  for (int64_t row = 0; row < rows; ++row) {
    int64_t bucket = buckets.of(row);
    if (labels[row] == ignoreIndex || bucket < 0)
      continue;
    totals[bucket] +=
        std::log(stats->sum[row]) + stats->max[row] - stats->target[row];
    ++counted[bucket];
  }
  return llvm::Error::success();
}

/// The sums in fp32, from the double ones.
static void storeSums(const std::vector<double> &totals, float *loss) {
  for (size_t i = 0; i < totals.size(); ++i)
    loss[i] = float(totals[i]);
}

llvm::Error cpu::crossEntropy(const float *logits, const int32_t *labels,
                              int64_t rows, VocabBlock block,
                              int64_t ignoreIndex, RowReduce reduce,
                              const LossBuckets &buckets, float *loss,
                              int64_t *count) {
  std::vector<double> totals(buckets.count(rows), 0.0);
  std::fill(count, count + totals.size(), 0);
  if (llvm::Error error = addRowLosses(logits, labels, rows, block, ignoreIndex,
                                       reduce, buckets, totals.data(), count))
    return error;
  storeSums(totals, loss);
  return llvm::Error::success();
}

llvm::Error cpu::linearCrossEntropy(const float *input, const float *weight,
                                    const int32_t *labels,
                                    const TiledLogits &shape,
                                    int64_t ignoreIndex, RowReduce reduce,
                                    const LossBuckets &buckets, float *tile,
                                    float *loss, int64_t *count) {
  // The rows in the untiled loss's order: the same sums.
  std::vector<double> totals(buckets.count(shape.rows), 0.0);
  std::fill(count, count + totals.size(), 0);
  for (int64_t first = 0; first < shape.rows; first += shape.tileRows) {
    int64_t rows = std::min(shape.tileRows, shape.rows - first);
    cpu::gemm(shape.logits(input, weight, tile, first, rows));
    if (shape.softcap > 0)
      cpu::softcap(tile, shape.softcap, tile, rows * shape.block.columns);
    if (llvm::Error error =
            addRowLosses(tile, labels + first, rows, shape.block, ignoreIndex,
                         reduce, buckets.from(first), totals.data(), count))
      return error;
  }
  storeSums(totals, loss);
  return llvm::Error::success();
}

void cpu::transpose(const float *x, const int64_t *shape,
                    const int64_t *permutation, int64_t rank, float *out) {
  std::vector<int64_t> inStrides(rank, 1), outShape(rank);
  for (int64_t d = rank - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * shape[d + 1];
  int64_t total = 1;
  for (int64_t d = 0; d < rank; ++d) {
    outShape[d] = shape[permutation[d]];
    total *= shape[d];
  }
  std::vector<int64_t> index(rank, 0); // position in the output
  for (int64_t i = 0; i < total; ++i) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += index[d] * inStrides[permutation[d]];
    out[i] = x[source];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < outShape[d])
        break;
      index[d] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

void cpu::fill(float *out, int64_t count, double value) {
  std::fill(out, out + count, float(value));
}

llvm::Error cpu::embeddingGrad(const int32_t *ids, int64_t count,
                               const float *grad, int64_t vocab, int64_t dim,
                               float *out) {
  if (llvm::Error error = checkIds(ids, count, vocab))
    return error;
  std::fill(out, out + vocab * dim, 0.0f);
  for (int64_t i = 0; i < count; ++i) {
    float *row = out + int64_t(ids[i]) * dim;
    for (int64_t d = 0; d < dim; ++d)
      row[d] += grad[i * dim + d];
  }
  return llvm::Error::success();
}

TWILL_CPU_CLONES void cpu::rmsNormGrad(const float *x, const float *weight,
                                       const float *grad, float *out,
                                       int64_t rows, int64_t dim, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    const float *in = x + row * dim, *dy = grad + row * dim;
    double r = inverseRms(in, dim, eps);
    double dot = cpu::sumInBlocks( // sum of weight * dy * x
        dim, [&](int64_t i) { return weight[i] * dy[i] * in[i]; });
    float scale = float(r), correction = float(r * r * r * dot / dim);
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i)
      out[row * dim + i] = scale * weight[i] * dy[i] - correction * in[i];
  }
}

void cpu::rmsNormWeightGrad(const float *x, const float *grad, float *out,
                            int64_t rows, int64_t dim, double eps) {
  std::vector<double> inverse(rows), sums(dim, 0.0);
  for (int64_t row = 0; row < rows; ++row)
    inverse[row] = inverseRms(x + row * dim, dim, eps);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t i = 0; i < dim; ++i)
      sums[i] += double(grad[row * dim + i]) * x[row * dim + i] * inverse[row];
  for (int64_t i = 0; i < dim; ++i)
    out[i] = float(sums[i]);
}

TWILL_CPU_CLONES void cpu::swigluGrad(const float *gate, const float *up,
                                      const float *grad, float *gateGrad,
                                      float *upGrad, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    math::swigluGrad(gate[i], up[i], grad[i], gateGrad[i], upGrad[i], kExp);
}

TWILL_CPU_CLONES void cpu::gegluGrad(const float *gate, const float *up,
                                     const float *grad, float *gateGrad,
                                     float *upGrad, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    math::gegluGrad(gate[i], up[i], grad[i], gateGrad[i], upGrad[i], kExp);
}

TWILL_CPU_CLONES void cpu::sigmoidGateGrad(const float *gate, const float *up,
                                           const float *grad, float *gateGrad,
                                           float *upGrad, int64_t count) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i)
    math::sigmoidGateGrad(gate[i], up[i], grad[i], gateGrad[i], upGrad[i],
                          kExp);
}

/// dz = (softmax(z) - onehot(label)) * lossGrad row by row (the gradient
/// of the row's sum), zero past the vocab and in ignored rows. With `softcap`,
/// z are capped logits, and dz is scaled by the cap's derivative, 1 - (z /
/// softcap)^2.
TWILL_CPU_CLONES static void
crossEntropyGradRows(const float *logits, const int32_t *labels, int64_t rows,
                     VocabBlock block, int64_t ignoreIndex,
                     const LogitRowStats &stats, const LossBuckets &buckets,
                     const float *lossGrads, double softcap, float *out) {
  int64_t columns =
      std::clamp<int64_t>(block.vocab - block.first, 0, block.columns);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    float *dz = out + row * block.columns;
    const float *z = logits + row * block.columns;
    int64_t bucket = buckets.of(row);
    int64_t end = labels[row] == ignoreIndex || bucket < 0 ? 0 : columns;
    float lossGrad = end ? lossGrads[bucket] : 0.0f;
    float max = float(stats.max[row]);
    float scale = float(double(lossGrad) / stats.sum[row]);
    // The cap's derivative, 1 - (z / softcap)^2: exactly 1 without a cap
    // (inverse 0), so plain logits' gradient is unchanged by it.
    float inverse = softcap > 0 ? float(1.0 / softcap) : 0.0f;
#pragma omp simd
    for (int64_t i = 0; i < end; ++i) {
      float capped = z[i] * inverse;
      dz[i] = cpu::expApprox(z[i] - max) * scale * (1.0f - capped * capped);
    }
    // The label's logit is its row's target: z[label] may be overwritten
    // already (in place).
    int64_t label = int64_t(labels[row]) - block.first;
    float capped = float(stats.target[row]) * inverse;
    if (end > 0 && label >= 0 && label < columns)
      dz[label] -= lossGrad * (1.0f - capped * capped);
    std::fill(dz + end, dz + block.columns, 0.0f);
  }
}

llvm::Error cpu::crossEntropyGrad(const float *logits, const int32_t *labels,
                                  int64_t rows, VocabBlock block,
                                  int64_t ignoreIndex, RowReduce reduce,
                                  const LossBuckets &buckets,
                                  const float *lossGrads, float *out) {
  llvm::Expected<LogitRowStats> stats =
      logitRowStats(logits, labels, rows, block, ignoreIndex, reduce);
  if (!stats)
    return stats.takeError();
  crossEntropyGradRows(logits, labels, rows, block, ignoreIndex, *stats,
                       buckets, lossGrads, /*softcap=*/0, out);
  return llvm::Error::success();
}

llvm::Error cpu::linearCrossEntropyGrad(const float *input, const float *weight,
                                        const int32_t *labels,
                                        const TiledLogits &shape,
                                        int64_t ignoreIndex, RowReduce reduce,
                                        const LossBuckets &buckets,
                                        const float *lossGrads, float *tile,
                                        float *out) {
  for (int64_t first = 0; first < shape.rows; first += shape.tileRows) {
    int64_t rows = std::min(shape.tileRows, shape.rows - first);
    cpu::gemm(shape.logits(input, weight, tile, first, rows));
    if (shape.softcap > 0)
      cpu::softcap(tile, shape.softcap, tile, rows * shape.block.columns);
    // The logits' gradient replaces them, row by row.
    llvm::Expected<LogitRowStats> stats = logitRowStats(
        tile, labels + first, rows, shape.block, ignoreIndex, reduce);
    if (!stats)
      return stats.takeError();
    crossEntropyGradRows(tile, labels + first, rows, shape.block, ignoreIndex,
                         *stats, buckets.from(first), lossGrads, shape.softcap,
                         tile);
    cpu::gemm(shape.wrtWeight
                  ? shape.weightGrad(tile, input, out, first, rows)
                  : shape.inputGrad(tile, weight, out, first, rows));
  }
  if (shape.wrtWeight && shape.rows == 0)
    std::fill(out, out + shape.block.columns * shape.hidden, 0.0f);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

void cpu::accumulateSquares(const float *x, int64_t count, double &sumSquares) {
  for (int64_t i = 0; i < count; ++i)
    sumSquares += double(x[i]) * x[i];
}

void cpu::adamw(const float *param, const float *grad, const float *expAvg,
                const float *expAvgSq, float lr, float gradScale, int64_t step,
                const AdamWSettings &settings, float *newParam,
                float *newExpAvg, float *newExpAvgSq, int64_t count) {
  math::AdamWStep scalars =
      math::adamwStep(lr, step, settings.beta1, settings.beta2, settings.eps,
                      settings.weightDecay);
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i) {
    float p = param[i], m = expAvg[i], v = expAvgSq[i];
    math::adamwUpdate(scalars, grad[i] * gradScale, p, m, v);
    newParam[i] = p;
    newExpAvg[i] = m;
    newExpAvgSq[i] = v;
  }
}
