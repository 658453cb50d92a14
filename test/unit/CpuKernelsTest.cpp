//===- CpuKernelsTest.cpp - CPU kernels against naive loops ---------------===//

#include "runtime/backend/cpu/CpuKernels.h"
#include "support/ElementMath.h"
#include "test/unit/RandomValues.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

using namespace twill;
using ::testing::HasSubstr;

namespace {

/// A whole vocab needs no reduction across ranks.
llvm::Error noReduce(std::vector<double> &, bool) {
  return llvm::Error::success();
}

using test::expectClose;
using test::expectNear;
using test::randomValues;

TEST(CpuKernels, TransposeMatchesIndexArithmetic) {
  const int64_t shape[] = {2, 3, 4}, permutation[] = {2, 0, 1};
  std::vector<float> x = randomValues(24, 3), out(24);
  cpu::transpose(x.data(), shape, permutation, 3, out.data());
  // out[c][a][b] = x[a][b][c], out shape [4, 2, 3].
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c)
        EXPECT_EQ(out[(c * 2 + a) * 3 + b], x[(a * 3 + b) * 4 + c]);
}

// Dropout keeps what support/Dropout.h says, scaled; a rank holding a block
// of the features (offset 6, not a multiple of four) computes the whole's
// columns.
TEST(CpuKernels, DropoutIsTheMaskOfEachElementsPlace) {
  int64_t tokens = 5, features = 19;
  std::vector<float> x = randomValues(tokens * features, 1);
  std::vector<int32_t> index = {0, 7, 1000, 3, 65536};
  DropoutKey key{5, 77, uint64_t(1) << 33 | 9, dropoutThreshold(0.4)};
  std::vector<float> out(x.size());
  cpu::dropout(x.data(), index.data(), tokens, features, 0, key, 0.4,
               out.data());
  int64_t dropped = 0;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t f = 0; f < features; ++f) {
      bool keep = dropoutKeeps(key, uint32_t(index[t]), uint32_t(f));
      float expected = keep ? x[t * features + f] * float(1 / 0.6) : 0.0f;
      EXPECT_EQ(out[t * features + f], expected) << t << ", " << f;
      dropped += !keep;
    }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, tokens * features);

  int64_t first = 6, block = 9;
  std::vector<float> part(tokens * block), partOut(tokens * block);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t f = 0; f < block; ++f)
      part[t * block + f] = x[t * features + first + f];
  cpu::dropout(part.data(), index.data(), tokens, block, first, key, 0.4,
               partOut.data());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t f = 0; f < block; ++f)
      EXPECT_EQ(partOut[t * block + f], out[t * features + first + f]);
}

// Sliding windows too: of 2 (a query and the one before it) and of 4,
// which a segment of 4 crosses; and Gemma 2's soft-capped logits. Each
// row's log-sum-exp is the log of its weights' sum.
TEST(CpuKernels, AttentionIsCausalGroupedAndStaysInsideSegmentsAndWindows) {
  const int64_t batch = 1, seq = 7, heads = 4, kvHeads = 2, dim = 3;
  std::vector<float> q = randomValues(seq * heads * dim, 4);
  std::vector<float> k = randomValues(seq * kvHeads * dim, 5);
  std::vector<float> v = randomValues(seq * kvHeads * dim, 6);
  const int32_t segments[] = {0, 0, 1, 1, 1, 1, 1};
  for (auto [window, softcap] :
       {std::pair<int64_t, double>{0, 0}, {2, 0}, {4, 0}, {4, 0.8}}) {
    std::vector<float> out(q.size()), expected(q.size());
    std::vector<float> lse(heads * seq), expectedLse(heads * seq);
    double scale = 0.7;
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kv = h / (heads / kvHeads);
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> weights;
        double total = 0;
        for (int64_t j = 0; j < seq; ++j) {
          double weight = 0;
          if (j <= i && segments[j] == segments[i] &&
              (window == 0 || i - j < window)) {
            double dot = 0;
            for (int64_t d = 0; d < dim; ++d)
              dot += q[(i * heads + h) * dim + d] *
                     k[(j * kvHeads + kv) * dim + d];
            double logit = dot * scale;
            if (softcap > 0)
              logit = softcap * std::tanh(logit / softcap);
            weight = std::exp(logit);
          }
          weights.push_back(weight);
          total += weight;
        }
        expectedLse[h * seq + i] = float(std::log(total));
        for (int64_t d = 0; d < dim; ++d) {
          double sum = 0;
          for (int64_t j = 0; j < seq; ++j)
            sum += weights[j] / total * v[(j * kvHeads + kv) * dim + d];
          expected[(i * heads + h) * dim + d] = float(sum);
        }
      }
    }
    cpu::attention(q.data(), k.data(), v.data(), segments, out.data(),
                   lse.data(), batch, seq, HeadBlock::whole(heads), kvHeads,
                   dim, {scale, window, softcap});
    expectNear(out, expected);
    expectNear(lse, expectedLse);
  }
}

/// Grouped-query attention on a block of the query heads (global heads 1..3
/// of 4 over 2 KV heads), two packed documents per row, two rows.
struct AttentionCase {
  static constexpr int64_t batch = 2, seq = 7, kvHeads = 2, dim = 4;
  HeadBlock heads{3, 1, 4};
  std::vector<float> q = randomValues(batch * seq * 3 * dim, 11);
  std::vector<float> k = randomValues(batch * seq * kvHeads * dim, 12);
  std::vector<float> v = randomValues(batch * seq * kvHeads * dim, 13);
  std::vector<float> w = randomValues(q.size(), 14); // dL/dout
  std::vector<int32_t> segments = {0, 0, 0, 1, 1, 2, 2, 5, 5, 5, 5, 6, 6, 6};
  double scale = 0.5;
  int64_t window = 0; // none; a sliding window's size
  double softcap = 0; // none; Gemma 2's soft-cap

  /// The output, then each row's log-sum-exp.
  std::pair<std::vector<float>, std::vector<float>>
  forward(int64_t budget) const {
    std::vector<float> out(q.size()), lse(batch * heads.count * seq);
    cpu::attention(q.data(), k.data(), v.data(), segments.data(), out.data(),
                   lse.data(), batch, seq, heads, kvHeads, dim,
                   {scale, window, softcap}, budget);
    return {out, lse};
  }
  /// L = sum(out * w).
  double loss() const {
    std::vector<float> out = forward(1 << 20).first;
    double total = 0;
    for (size_t i = 0; i < out.size(); ++i)
      total += double(out[i]) * w[i];
    return total;
  }
  /// From the forward's log-sum-exps (`kept`), or recomputing them.
  std::vector<std::vector<float>> gradients(int64_t budget,
                                            bool kept = true) const {
    std::vector<std::vector<float>> grads = {std::vector<float>(q.size()),
                                             std::vector<float>(k.size()),
                                             std::vector<float>(v.size())};
    std::vector<float> lse = forward(budget).second;
    cpu::attentionGrad(q.data(), k.data(), v.data(),
                       kept ? lse.data() : nullptr, w.data(), segments.data(),
                       grads[0].data(), grads[1].data(), grads[2].data(), batch,
                       seq, heads, kvHeads, dim, {scale, window, softcap},
                       budget);
    return grads;
  }
};

// With a window of 3 each chunk of queries sees keys from its first
// query's window on.
TEST(CpuKernels, AttentionChunksAgreeWithOneChunk) {
  for (int64_t window : {0, 3}) {
    AttentionCase c;
    c.window = window;
    c.softcap = window ? 0.6 : 0;
    // A budget of one byte makes chunks of one query; 1 MiB one chunk.
    auto [out, lse] = c.forward(1);
    auto [wholeOut, wholeLse] = c.forward(1 << 20);
    expectNear(out, wholeOut);
    expectNear(lse, wholeLse);
    auto oneByOne = c.gradients(1), whole = c.gradients(1 << 20);
    for (int i = 0; i < 3; ++i)
      expectNear(oneByOne[i], whole[i]);
  }
}

// The gradient from the forward's log-sum-exps is the one that recomputes
// them (each row's max and sum again), to rounding: the probabilities are
// exp(logit - lse) in one case, exp(logit - max) / sum in the other.
TEST(CpuKernels, AttentionGradientFromKeptStatisticsIsTheRecomputedOne) {
  for (int64_t window : {0, 3}) {
    AttentionCase c;
    c.window = window;
    c.softcap = window ? 0.6 : 0;
    for (int64_t budget : {int64_t(1), int64_t(1) << 20}) {
      auto kept = c.gradients(budget), recomputed = c.gradients(budget, false);
      for (int i = 0; i < 3; ++i)
        expectNear(kept[i], recomputed[i], 1e-6f);
    }
  }
}

TEST(CpuKernels, AttentionGradientsMatchFiniteDifferences) {
  for (int64_t window : {0, 3}) {
    AttentionCase c;
    c.window = window;
    c.softcap = window ? 0.6 : 0;         // through the cap's tanh too
    auto grads = c.gradients(40 * 4 * 4); // a few rows per chunk
    std::vector<float> *inputs[] = {&c.q, &c.k, &c.v};
    for (int input = 0; input < 3; ++input) {
      std::vector<float> &values = *inputs[input];
      for (size_t i = 0; i < values.size(); i += 5) {
        float saved = values[i];
        const float step = 1e-2f;
        values[i] = saved + step;
        double up = c.loss();
        values[i] = saved - step;
        double down = c.loss();
        values[i] = saved;
        EXPECT_NEAR(grads[input][i], (up - down) / (2 * step), 2e-3)
            << "input " << input << " element " << i << " window " << window;
      }
    }
  }
}

TEST(CpuKernels, CrossEntropySkipsIgnoredAndRejectsBadLabels) {
  const float logits[] = {0, 0, 0, 1, 2, 3, 5, 5, 5};
  const int32_t labels[] = {1, -100, 2};
  float loss;
  int64_t count;
  ASSERT_FALSE(cpu::crossEntropy(logits, labels, 3, VocabBlock::whole(3), -100,
                                 noReduce, LossBuckets(), &loss, &count));
  EXPECT_EQ(count, 2);
  EXPECT_NEAR(loss, 2 * std::log(3.0), 1e-6);

  const int32_t bad[] = {1, 7, 2};
  llvm::Error error =
      cpu::crossEntropy(logits, bad, 3, VocabBlock::whole(3), -100, noReduce,
                        LossBuckets(), &loss, &count);
  EXPECT_THAT(llvm::toString(std::move(error)),
              HasSubstr("label 7 at position 1 is outside the vocabulary"));
}

// Sums per (row, sequence), the naive reference each position's
// logsumexp minus its label's logit added to its row's sequence's sum; a
// position of sequence 2 (of 2: padding) and an ignored one count for
// none. The gradient: each counted position's (softmax - onehot) times
// its sequence's gradient. The tiled loss (tiles of 3 across rows of 4)
// sums the same.
TEST(CpuKernels, CrossEntropySumsPerSequence) {
  const int64_t rows = 2, positions = 4, vocab = 3, hidden = 2;
  std::vector<float> input = randomValues(rows * positions * hidden, 7);
  std::vector<float> weight = randomValues(vocab * hidden, 8);
  std::vector<float> logits(rows * positions * vocab);
  TiledLogits shape{
      rows * positions, hidden, 3, VocabBlock::whole(vocab), 4, false, 0};
  cpu::gemm(shape.logits(input.data(), weight.data(), logits.data(), 0,
                         rows * positions));
  const int32_t labels[] = {1, 2, -100, 0, 2, 2, 1, 0};
  const int32_t sequence[] = {0, 0, 1, 1, 0, 1, 1, 2};
  LossBuckets buckets{sequence, positions, 2, 0};
  std::vector<double> expected(4, 0.0);
  std::vector<int64_t> expectedCount(4, 0);
  for (int64_t p = 0; p < rows * positions; ++p) {
    if (labels[p] < 0 || sequence[p] > 1)
      continue;
    const float *z = &logits[p * vocab];
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(double(z[v]));
    expected[p / positions * 2 + sequence[p]] += std::log(sum) - z[labels[p]];
    ++expectedCount[p / positions * 2 + sequence[p]];
  }
  float loss[4], tiledLoss[4];
  int64_t count[4], tiledCount[4];
  std::vector<float> tile(3 * vocab);
  ASSERT_FALSE(cpu::crossEntropy(logits.data(), labels, rows * positions,
                                 VocabBlock::whole(vocab), -100, noReduce,
                                 buckets, loss, count));
  ASSERT_FALSE(cpu::linearCrossEntropy(input.data(), weight.data(), labels,
                                       shape, -100, noReduce, buckets,
                                       tile.data(), tiledLoss, tiledCount));
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(loss[i], expected[i], 1e-6) << i;
    EXPECT_EQ(count[i], expectedCount[i]) << i;
    EXPECT_NEAR(tiledLoss[i], expected[i], 1e-6) << i;
    EXPECT_EQ(tiledCount[i], expectedCount[i]) << i;
  }
  const float grads[] = {0.5f, -2.0f, 3.0f, 0.25f};
  std::vector<float> dlogits(logits.size());
  ASSERT_FALSE(cpu::crossEntropyGrad(logits.data(), labels, rows * positions,
                                     VocabBlock::whole(vocab), -100, noReduce,
                                     buckets, grads, dlogits.data()));
  for (int64_t p = 0; p < rows * positions; ++p) {
    const float *z = &logits[p * vocab];
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(double(z[v]));
    bool counted = labels[p] >= 0 && sequence[p] <= 1;
    double g = counted ? grads[p / positions * 2 + sequence[p]] : 0;
    for (int64_t v = 0; v < vocab; ++v)
      EXPECT_NEAR(dlogits[p * vocab + v],
                  g * (std::exp(double(z[v])) / sum - (v == labels[p])), 1e-6)
          << p << " " << v;
  }
}

/// linear_cross_entropy against cross_entropy of the whole logits (with
/// `softcap`, of softcap's of them, and its gradient through softcap_grad):
/// 11 rows in tiles of 4 (the last of 3), a block of 6 of a 10-column vocab
/// (its last 2 columns padding) and an ignored row.
void expectTilesAgreeWithWholeLogits(double softcap) {
  const int64_t rows = 11, hidden = 5, columns = 6;
  TiledLogits shape{rows, hidden, 4,      VocabBlock{columns, 6, 10},
                    4,    false,  softcap};
  std::vector<float> input = randomValues(rows * hidden, 1);
  std::vector<float> weight = randomValues(columns * hidden, 2);
  std::vector<int32_t> labels = {0, 7, 3, 9, -100, 6, 2, 8, 1, 7, 6};
  std::vector<float> logits(rows * columns), tile(4 * columns);
  RowMajorGemm whole =
      shape.logits(input.data(), weight.data(), logits.data(), 0, rows);
  cpu::gemm(whole);
  std::vector<float> capped = logits;
  if (softcap > 0)
    cpu::softcap(logits.data(), softcap, capped.data(), capped.size());

  float loss, tiledLoss;
  int64_t count, tiledCount;
  ASSERT_FALSE(cpu::crossEntropy(capped.data(), labels.data(), rows,
                                 shape.block, -100, noReduce, LossBuckets(),
                                 &loss, &count));
  ASSERT_FALSE(cpu::linearCrossEntropy(
      input.data(), weight.data(), labels.data(), shape, -100, noReduce,
      LossBuckets(), tile.data(), &tiledLoss, &tiledCount));
  EXPECT_EQ(tiledCount, count);
  EXPECT_NEAR(tiledLoss, loss, 1e-6 * std::abs(loss));

  // The gradients: dlogits times the weight, and dlogits^T times the input.
  std::vector<float> dlogits(rows * columns);
  const float lossGrad = 0.37f;
  ASSERT_FALSE(cpu::crossEntropyGrad(capped.data(), labels.data(), rows,
                                     shape.block, -100, noReduce, LossBuckets(),
                                     &lossGrad, dlogits.data()));
  if (softcap > 0)
    cpu::softcapGrad(logits.data(), dlogits.data(), softcap, dlogits.data(),
                     dlogits.size());
  std::vector<float> inputGrad(rows * hidden), weightGrad(columns * hidden);
  cpu::gemm(shape.inputGrad(dlogits.data(), weight.data(), inputGrad.data(), 0,
                            rows));
  cpu::gemm(shape.weightGrad(dlogits.data(), input.data(), weightGrad.data(), 0,
                             rows));
  std::vector<float> tiled(rows * hidden);
  ASSERT_FALSE(cpu::linearCrossEntropyGrad(
      input.data(), weight.data(), labels.data(), shape, -100, noReduce,
      LossBuckets(), &lossGrad, tile.data(), tiled.data()));
  expectNear(tiled, inputGrad, 1e-6f);
  shape.wrtWeight = true;
  tiled.assign(columns * hidden, 0);
  ASSERT_FALSE(cpu::linearCrossEntropyGrad(
      input.data(), weight.data(), labels.data(), shape, -100, noReduce,
      LossBuckets(), &lossGrad, tile.data(), tiled.data()));
  expectNear(tiled, weightGrad, 1e-6f);
}

TEST(CpuKernels, LinearCrossEntropyTilesAgreeWithWholeLogits) {
  expectTilesAgreeWithWholeLogits(/*softcap=*/0);
}

// Gemma 2's final logits, capped where each tile is formed: a cap of 0.7
// bends logits of about 1.
TEST(CpuKernels, SoftCappedTilesAgreeWithCappedWholeLogits) {
  expectTilesAgreeWithWholeLogits(/*softcap=*/0.7);
}

TEST(CpuKernels, ElementwiseOps) {
  const float a[] = {-1, 0, 2}, b[] = {3, 4, -5};
  float out[3];
  cpu::mul(a, b, out, 3);
  EXPECT_THAT(out, ::testing::ElementsAre(-3, 0, -10));
  cpu::add(a, b, out, 3);
  EXPECT_THAT(out, ::testing::ElementsAre(2, 4, -3));
  cpu::scale(a, 0.5, out, 3);
  EXPECT_THAT(out, ::testing::ElementsAre(-0.5, 0, 1));
  cpu::swiglu(a, b, out, 3);
  EXPECT_NEAR(out[0], -1 / (1 + std::exp(1.0)) * 3, 1e-6);
  EXPECT_EQ(out[1], 0);
  EXPECT_NEAR(out[2], 2 / (1 + std::exp(-2.0)) * -5, 1e-5);
}

//===----------------------------------------------------------------------===//
// Each kernel against a naive loop of its definition, in double
//===----------------------------------------------------------------------===//

std::string errorText(llvm::Error error) {
  return llvm::toString(std::move(error));
}

/// Each value within `absolute + relative * |expected|` of the naive one.
TEST(CpuKernels, EmbeddingTakesEachIdsRowAndZerosOutsideItsBlock) {
  const int64_t vocab = 13, dim = 7;
  std::vector<float> table = randomValues(vocab * dim, 21);
  std::vector<int32_t> ids = {0, 12, 5, 5, 9, 1, 3, 12, 7, 2, 11};
  const int64_t count = ids.size();
  std::vector<float> out(count * dim, 9.0f), expected(count * dim);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t d = 0; d < dim; ++d)
      expected[i * dim + d] = table[ids[i] * dim + d];
  ASSERT_FALSE(
      cpu::embedding(table.data(), vocab, dim, ids.data(), count, out.data()));
  expectNear(out, expected, 0.0f);

  // A rank holding rows [4, 9) (vocab parallel): other ids give zero rows.
  const int64_t first = 4, rows = 5;
  std::vector<float> block(table.begin() + first * dim,
                           table.begin() + (first + rows) * dim);
  for (int64_t i = 0; i < count; ++i)
    for (int64_t d = 0; d < dim; ++d)
      expected[i * dim + d] = ids[i] >= first && ids[i] < first + rows
                                  ? table[ids[i] * dim + d]
                                  : 0.0f;
  out.assign(count * dim, 9.0f);
  ASSERT_FALSE(cpu::embedding(block.data(), rows, dim, ids.data(), count,
                              out.data(), first));
  expectNear(out, expected, 0.0f);

  for (int32_t bad : {13, -1}) {
    ids[2] = bad;
    EXPECT_THAT(errorText(cpu::embedding(table.data(), vocab, dim, ids.data(),
                                         count, out.data())),
                HasSubstr("token id " + std::to_string(bad) +
                          " at position 2 is outside the vocabulary [0, 13)"));
  }
}

TEST(CpuKernels, EmbeddingGradSumsTheGradRowsOfEachId) {
  const int64_t vocab = 13, dim = 7;
  std::vector<int32_t> ids = {3, 0, 12, 3, 7, 3, 12, 5, 0, 9, 3};
  const int64_t count = ids.size();
  std::vector<float> grad = randomValues(count * dim, 22);
  std::vector<double> expected(vocab * dim, 0.0);
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t i = 0; i < count; ++i)
      if (ids[i] == v)
        for (int64_t d = 0; d < dim; ++d)
          expected[v * dim + d] += grad[i * dim + d];
  std::vector<float> out(vocab * dim, 9.0f); // stale values are replaced
  ASSERT_FALSE(cpu::embeddingGrad(ids.data(), count, grad.data(), vocab, dim,
                                  out.data()));
  expectClose(out, expected, 1e-6, 1e-6);

  ids[4] = 13;
  EXPECT_THAT(errorText(cpu::embeddingGrad(ids.data(), count, grad.data(),
                                           vocab, dim, out.data())),
              HasSubstr("token id 13 at position 4 is outside the vocabulary "
                        "[0, 13)"));
}

/// 1 / sqrt(mean(x^2) + eps) of a row, in double.
double naiveInverseRms(const float *row, int64_t dim, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i)
    sum += double(row[i]) * row[i];
  return 1 / std::sqrt(sum / dim + eps);
}

// y = x * r(x) * w, r = (mean(x^2) + eps)^-1/2, so dy_i/dx_j = w_i (delta_ij
// r - x_i x_j r^3 / dim): the whole Jacobian, summed against the gradient.
// The first row is tiny (eps dominates it); 291 values cross the kernels'
// 256-value blocks.
TEST(CpuKernels, RmsNormAndItsGradientsMatchTheDefinition) {
  const double eps = 1e-5;
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{7, 33}, {3, 291}}) {
    std::vector<float> x = randomValues(rows * dim, 23);
    std::vector<float> weight = randomValues(dim, 24);
    std::vector<float> grad = randomValues(rows * dim, 25);
    for (int64_t i = 0; i < dim; ++i)
      x[i] *= 1e-3f;
    std::vector<double> y(rows * dim), dx(rows * dim, 0.0), dw(dim, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const float *in = &x[r * dim], *g = &grad[r * dim];
      double inverse = naiveInverseRms(in, dim, eps);
      for (int64_t i = 0; i < dim; ++i) {
        y[r * dim + i] = in[i] * inverse * weight[i];
        dw[i] += double(g[i]) * in[i] * inverse;
        for (int64_t j = 0; j < dim; ++j)
          dx[r * dim + j] +=
              double(g[i]) * weight[i] *
              ((i == j ? inverse : 0.0) -
               double(in[i]) * in[j] * inverse * inverse * inverse / dim);
      }
    }
    std::vector<float> out(rows * dim), weightGrad(dim);
    cpu::rmsNorm(x.data(), weight.data(), out.data(), rows, dim, eps);
    expectClose(out, y, 1e-6, 1e-6);
    cpu::rmsNormGrad(x.data(), weight.data(), grad.data(), out.data(), rows,
                     dim, eps);
    expectClose(out, dx, 1e-6, 1e-6);
    cpu::rmsNormWeightGrad(x.data(), grad.data(), weightGrad.data(), rows, dim,
                           eps);
    expectClose(weightGrad, dw, 1e-6, 1e-6);
  }
}

/// Llama's inverse frequency of pair i, with Llama 3.1's scaling as Hugging
/// Face's _compute_llama3_parameters writes it.
double naiveFrequency(int64_t i, int64_t headDim, double theta,
                      const RopeFrequencyScaling &s) {
  double frequency = std::pow(theta, -2.0 * i / headDim);
  if (s.factor == 0)
    return frequency;
  if (s.originalMaxPosition == 0) // linear
    return frequency / s.factor;
  double wavelength = 2 * M_PI / frequency, old = s.originalMaxPosition;
  if (wavelength < old / s.highFreqFactor)
    return frequency;
  if (wavelength > old / s.lowFreqFactor)
    return frequency / s.factor;
  double smooth = (old / wavelength - s.lowFreqFactor) /
                  (s.highFreqFactor - s.lowFreqFactor);
  return (1 - smooth) * frequency / s.factor + smooth * frequency;
}

// x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]. With head size
// 10 and theta 1e4 the wavelengths are 6.3, 40, 250, 1579 and 9955: under
// the scaling below they fall in each of its three ranges.
TEST(CpuKernels, RopeRotatesEachHalfPairByItsPositionsAngle) {
  const int64_t tokens = 7, heads = 3, headDim = 10, half = 5;
  const double theta = 1e4;
  std::vector<float> x = randomValues(tokens * heads * headDim, 26);
  const int32_t positions[] = {0, 1, 7, 100, 1000, 8191, 3};
  for (RopeFrequencyScaling scaling :
       {RopeFrequencyScaling{}, RopeFrequencyScaling{8, 1, 4, 512},
        RopeFrequencyScaling{8}})
    for (bool inverse : {false, true}) {
      std::vector<double> expected(x.size());
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < half; ++i) {
            double angle =
                positions[t] * naiveFrequency(i, headDim, theta, scaling);
            if (inverse)
              angle = -angle;
            int64_t base = (t * heads + h) * headDim;
            double x1 = x[base + i], x2 = x[base + i + half];
            expected[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
            expected[base + i + half] =
                x2 * std::cos(angle) + x1 * std::sin(angle);
          }
      std::vector<float> out(x.size());
      cpu::rope(x.data(), positions, out.data(), tokens, heads, headDim, theta,
                scaling, inverse);
      SCOPED_TRACE(testing::Message() << "factor " << scaling.factor
                                      << (inverse ? ", inverse" : ""));
      expectClose(out, expected, 1e-6, 1e-6);
    }
}

TEST(CpuKernels, CopyAndFillWriteTheirCountAndNothingPast) {
  const int64_t count = 2 * 65536 + 7; // three of copy's blocks, one partial
  std::vector<float> from = randomValues(count, 27), to(count + 1, 9.0f);
  cpu::copy(from.data(), to.data(), count);
  EXPECT_EQ(to[count], 9.0f);
  to.pop_back();
  expectNear(to, from, 0.0f);
  cpu::copy(to.data(), to.data(), count); // in place: nothing changes
  expectNear(to, from, 0.0f);

  cpu::fill(to.data(), 33, 0.1);
  for (int64_t i = 0; i < count; ++i)
    ASSERT_EQ(to[i], i < 33 ? 0.1f : from[i]) << "at " << i;
}

TEST(CpuKernels, DivIsTheQuotientOfEachPair) {
  const int64_t count = 33;
  std::vector<float> lhs = randomValues(count, 28);
  std::vector<float> rhs = randomValues(count, 29), out(count);
  std::vector<double> expected(count);
  for (int64_t i = 0; i < count; ++i) {
    rhs[i] += rhs[i] < 0 ? -0.25f : 0.25f; // away from zero
    expected[i] = double(lhs[i]) / rhs[i];
  }
  cpu::div(lhs.data(), rhs.data(), out.data(), count);
  expectClose(out, expected, 1e-7, 0); // one rounding: half an ulp
}

// DoRA's column norms and magnitude scaling; 133 columns cross
// scaleColumnsGrad's 64-column blocks, the last one partial.
TEST(CpuKernels, RowSumSquaresAndColumnScalesMatchTheirSums) {
  const int64_t rows = 7, columns = 133;
  std::vector<float> x = randomValues(rows * columns, 30);
  std::vector<float> scale = randomValues(columns, 31);
  std::vector<float> grad = randomValues(rows * columns, 32);
  std::vector<double> squares(rows, 0.0), scaled(rows * columns),
      inputGrad(rows * columns), scaleGrad(columns, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c) {
      int64_t i = r * columns + c;
      squares[r] += double(x[i]) * x[i];
      scaled[i] = double(x[i]) * scale[c];
      inputGrad[i] = double(grad[i]) * scale[c];
      scaleGrad[c] += double(grad[i]) * x[i];
    }
  std::vector<float> out(rows), values(rows * columns), sums(columns);
  cpu::rowSumSquares(x.data(), rows, columns, out.data());
  expectClose(out, squares, 1e-7, 0); // summed in double: one rounding
  cpu::scaleColumns(x.data(), scale.data(), rows, columns, values.data());
  expectClose(values, scaled, 1e-7, 0);
  cpu::scaleColumnsGrad(x.data(), scale.data(), grad.data(), rows, columns,
                        values.data(), sums.data());
  expectClose(values, inputGrad, 1e-7, 0);
  expectClose(sums, scaleGrad, 1e-7, 1e-12);
}

// A bias and its gradient; 133 columns cross columnSums' 64-column blocks.
TEST(CpuKernels, AddColumnsAndColumnSumsMatchTheirLoops) {
  const int64_t rows = 9, columns = 133;
  std::vector<float> x = randomValues(rows * columns, 36);
  std::vector<float> bias = randomValues(columns, 37);
  std::vector<double> shifted(rows * columns), sums(columns, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c) {
      int64_t i = r * columns + c;
      shifted[i] = double(x[i]) + bias[c];
      sums[c] += x[i];
    }
  std::vector<float> values(rows * columns), out(columns);
  cpu::addColumns(x.data(), bias.data(), rows, columns, values.data());
  expectClose(values, shifted, 1e-7, 0); // one rounding
  cpu::columnSums(x.data(), rows, columns, out.data());
  expectClose(out, sums, 1e-7, 1e-12); // summed in double: one rounding
}

// Gemma 2's final logits: cap tanh(x / cap), and its derivative.
TEST(CpuKernels, SoftcapSquashesIntoTheCapAndItsGradientIsTheTanhs) {
  const int64_t count = 41;
  std::vector<float> x = randomValues(count, 40),
                     grad = randomValues(count, 41);
  for (float &value : x)
    value *= 50;
  std::vector<double> capped(count), dx(count);
  for (int64_t i = 0; i < count; ++i) {
    double t = std::tanh(double(x[i]) / 30);
    capped[i] = 30 * t;
    dx[i] = grad[i] * (1 - t * t);
  }
  std::vector<float> out(count);
  cpu::softcap(x.data(), 30, out.data(), count);
  expectClose(out, capped, 1e-6, 1e-6);
  cpu::softcapGrad(x.data(), grad.data(), 30, out.data(), count);
  expectClose(out, dx, 1e-6, 1e-7);
}

// The squares add to what the sum holds; the coefficient is
// min(1, maxNorm / (norm + 1e-6)), so a norm equal to the limit clips a little.
TEST(CpuKernels, GradNormSquaresAccumulateAndClipAsTorchDoes) {
  std::vector<float> x = randomValues(33, 36);
  double sum = 2.5, expected = 2.5;
  for (float value : x)
    expected += double(value) * value;
  cpu::accumulateSquares(x.data(), 13, sum);
  cpu::accumulateSquares(x.data() + 13, 20, sum);
  EXPECT_NEAR(sum, expected, 1e-13);

  for (auto [norm, maxNorm] : {std::pair<float, double>{0.5f, 1.0},
                               {0.0f, 1.0},
                               {1.0f, 1.0},
                               {3.0f, 1.0},
                               {1e4f, 0.3}})
    EXPECT_FLOAT_EQ(math::clipCoefficient(norm, maxNorm),
                    float(std::min(1.0, maxNorm / (norm + 1e-6))))
        << "norm " << norm << ", max " << maxNorm;
}

// lr * step / warmup while warming up, then lr * (1 + cos(pi * progress)) /
// 2, progress going from 0 after the warmup to 1 at the last step.
TEST(CpuKernels, ScheduledLrWarmsUpLinearlyThenFallsAlongAHalfCosine) {
  const double lr = 3e-4;
  const int64_t total = 33;
  for (int64_t warmup : {0, 1, 7})
    for (int64_t step = 0; step <= total; ++step) {
      double expected =
          step < warmup
              ? lr * step / warmup
              : lr * (1 + std::cos(M_PI * (step - warmup) / (total - warmup))) /
                    2;
      EXPECT_NEAR(math::scheduledLr(step, total, lr, warmup), expected,
                  1e-7 * lr)
          << "step " << step << " of " << total << ", warmup " << warmup;
    }
  EXPECT_EQ(math::scheduledLr(0, total, lr, 7), 0.0f);
  EXPECT_EQ(math::scheduledLr(7, total, lr, 7), float(lr));
}

// torch.optim.AdamW's step t = step + 1 as Loshchilov and Hutter write it:
// decoupled decay of the parameter, then the bias-corrected moments; the
// second case's eps is large enough to tell sqrt(v^) + eps from
// sqrt(v^ + eps).
TEST(CpuKernels, AdamwIsOneTorchAdamwStep) {
  const int64_t count = 37;
  std::vector<float> param = randomValues(count, 37);
  std::vector<float> grad = randomValues(count, 38);
  std::vector<float> expAvg = randomValues(count, 39);
  std::vector<float> expAvgSq = randomValues(count, 40);
  for (float &v : expAvgSq)
    v = 0.01f * (0.1f + v * v);
  for (auto [step, settings] :
       {std::pair<int64_t, AdamWSettings>{0, {0.9, 0.999, 1e-8, 0.0}},
        {4, {0.9, 0.999, 1e-3, 0.1}}}) {
    const float lr = 1e-2f, gradScale = 0.5f;
    std::vector<double> p(count), m(count), v(count);
    int64_t t = step + 1;
    for (int64_t i = 0; i < count; ++i) {
      double g = double(grad[i]) * gradScale;
      m[i] = settings.beta1 * expAvg[i] + (1 - settings.beta1) * g;
      v[i] = settings.beta2 * expAvgSq[i] + (1 - settings.beta2) * g * g;
      double mHat = m[i] / (1 - std::pow(settings.beta1, t));
      double vHat = v[i] / (1 - std::pow(settings.beta2, t));
      p[i] = param[i] * (1 - lr * settings.weightDecay) -
             lr * mHat / (std::sqrt(vHat) + settings.eps);
    }
    std::vector<float> newParam(count), newExpAvg(count), newExpAvgSq(count);
    cpu::adamw(param.data(), grad.data(), expAvg.data(), expAvgSq.data(), lr,
               gradScale, step, settings, newParam.data(), newExpAvg.data(),
               newExpAvgSq.data(), count);
    SCOPED_TRACE(testing::Message() << "step " << step);
    expectClose(newParam, p, 1e-6, 1e-7);
    expectClose(newExpAvg, m, 1e-6, 1e-7);
    expectClose(newExpAvgSq, v, 1e-6, 0);
  }
}

} // namespace
