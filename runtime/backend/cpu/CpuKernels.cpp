//===- CpuKernels.cpp - fp32 reference kernels ----------------------------===//

#include "runtime/backend/cpu/CpuKernels.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace twill;

llvm::Error cpu::embedding(const float *table, int64_t vocab, int64_t dim,
                           const int32_t *ids, int64_t count, float *out) {
  for (int64_t i = 0; i < count; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("token id {0} at position {1} is outside the "
                        "vocabulary [0, {2})",
                        ids[i], i, vocab));
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(out + i * dim, table + int64_t(ids[i]) * dim,
                dim * sizeof(float));
  return llvm::Error::success();
}

void cpu::matmul(const float *lhs, const float *rhs, float *out, int64_t batch,
                 int64_t m, int64_t n, int64_t k, bool transposeLhs,
                 bool transposeRhs, bool rhsBatched) {
  CBLAS_TRANSPOSE opLhs = transposeLhs ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE opRhs = transposeRhs ? CblasTrans : CblasNoTrans;
  int64_t lda = transposeLhs ? m : k, ldb = transposeRhs ? k : n;
  if (!rhsBatched && !transposeLhs) {
    // A shared weight: all batch rows form one [batch * m, k] matrix.
    cblas_sgemm(CblasRowMajor, opLhs, opRhs, batch * m, n, k, 1.0f, lhs, lda,
                rhs, ldb, 0.0f, out, n);
    return;
  }
  for (int64_t b = 0; b < batch; ++b)
    cblas_sgemm(CblasRowMajor, opLhs, opRhs, m, n, k, 1.0f, lhs + b * m * k,
                lda, rhs + (rhsBatched ? b * k * n : 0), ldb, 0.0f,
                out + b * m * n, n);
}

void cpu::rmsNorm(const float *x, const float *weight, float *out, int64_t rows,
                  int64_t dim, double eps) {
#pragma omp parallel for
  for (int64_t row = 0; row < rows; ++row) {
    const float *in = x + row * dim;
    double sumSquares = 0;
    for (int64_t i = 0; i < dim; ++i)
      sumSquares += double(in[i]) * in[i];
    float inverse = float(1.0 / std::sqrt(sumSquares / dim + eps));
    for (int64_t i = 0; i < dim; ++i)
      out[row * dim + i] = weight[i] * (in[i] * inverse);
  }
}

/// Llama's inverse frequencies, with Llama 3.1 scaling when asked for.
static std::vector<double> ropeFrequencies(int64_t headDim, double theta,
                                           const cpu::RopeScaling &scaling) {
  std::vector<double> frequencies(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i) {
    double frequency = 1.0 / std::pow(theta, double(2 * i) / headDim);
    if (scaling.factor > 0) {
      double wavelength = 2 * M_PI / frequency;
      double original = double(scaling.originalMaxPosition);
      if (wavelength > original / scaling.lowFreqFactor) {
        frequency /= scaling.factor;
      } else if (wavelength >= original / scaling.highFreqFactor) {
        double smooth = (original / wavelength - scaling.lowFreqFactor) /
                        (scaling.highFreqFactor - scaling.lowFreqFactor);
        frequency =
            (1 - smooth) * frequency / scaling.factor + smooth * frequency;
      }
    }
    frequencies[i] = frequency;
  }
  return frequencies;
}

void cpu::rope(const float *x, const int32_t *positions, float *out,
               int64_t tokens, int64_t heads, int64_t headDim, double theta,
               const RopeScaling &scaling) {
  std::vector<double> frequencies = ropeFrequencies(headDim, theta, scaling);
  int64_t half = headDim / 2;
#pragma omp parallel for
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> cosines(half), sines(half);
    for (int64_t i = 0; i < half; ++i) {
      double angle = double(positions[t]) * frequencies[i];
      cosines[i] = float(std::cos(angle));
      sines[i] = float(std::sin(angle));
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

void cpu::attention(const float *q, const float *k, const float *v,
                    const int32_t *segments, float *out, int64_t batch,
                    int64_t seq, int64_t heads, int64_t kvHeads,
                    int64_t headDim, double scale) {
  int64_t group = heads / kvHeads;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kvHead = h / group;
      std::vector<float> scores(seq);
      std::vector<double> accumulator(headDim);
      for (int64_t i = 0; i < seq; ++i) {
        const float *query = q + ((b * seq + i) * heads + h) * headDim;
        // Scores of the visible keys: causal, and within the segment.
        float maxScore = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          if (segments && segments[b * seq + j] != segments[b * seq + i]) {
            scores[j] = -std::numeric_limits<float>::infinity();
            continue;
          }
          const float *key = k + ((b * seq + j) * kvHeads + kvHead) * headDim;
          float dot = 0;
          for (int64_t d = 0; d < headDim; ++d)
            dot += query[d] * key[d];
          scores[j] = float(dot * scale);
          maxScore = std::max(maxScore, scores[j]);
        }
        double total = 0;
        std::fill(accumulator.begin(), accumulator.end(), 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          if (scores[j] == -std::numeric_limits<float>::infinity())
            continue;
          double weight = std::exp(double(scores[j]) - maxScore);
          total += weight;
          const float *value = v + ((b * seq + j) * kvHeads + kvHead) * headDim;
          for (int64_t d = 0; d < headDim; ++d)
            accumulator[d] += weight * value[d];
        }
        float *result = out + ((b * seq + i) * heads + h) * headDim;
        for (int64_t d = 0; d < headDim; ++d)
          result[d] = float(accumulator[d] / total);
      }
    }
  }
}

void cpu::swiglu(const float *gate, const float *up, float *out,
                 int64_t count) {
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
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

void cpu::scale(const float *x, double factor, float *out, int64_t count) {
  float f = float(factor);
#pragma omp parallel for
  for (int64_t i = 0; i < count; ++i)
    out[i] = x[i] * f;
}

llvm::Error cpu::crossEntropy(const float *logits, const int32_t *labels,
                              int64_t rows, int64_t vocab, int64_t ignoreIndex,
                              float *loss, int64_t *count) {
  for (int64_t row = 0; row < rows; ++row)
    if (labels[row] != ignoreIndex && (labels[row] < 0 || labels[row] >= vocab))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("label {0} at position {1} is outside the vocabulary "
                        "[0, {2}) and is not the ignore index {3}",
                        labels[row], row, vocab, ignoreIndex));
  // Per-row losses in parallel, summed in row order: deterministic.
  std::vector<double> rowLoss(rows, 0.0);
#pragma omp parallel for
  for (int64_t row = 0; row < rows; ++row) {
    if (labels[row] == ignoreIndex)
      continue;
    const float *z = logits + row * vocab;
    float maxLogit = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i)
      sum += std::exp(double(z[i]) - maxLogit);
    rowLoss[row] = std::log(sum) + maxLogit - z[labels[row]];
  }
  double total = 0;
  int64_t counted = 0;
  for (int64_t row = 0; row < rows; ++row) {
    if (labels[row] == ignoreIndex)
      continue;
    total += rowLoss[row];
    ++counted;
  }
  *loss = float(total);
  *count = counted;
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
