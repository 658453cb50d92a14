//===- CpuKernelsTest.cpp - CPU kernels against naive loops ---------------===//

#include "runtime/backend/cpu/CpuKernels.h"
#include "test/unit/RandomValues.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <vector>

using namespace twill;
using ::testing::HasSubstr;

namespace {

/// A whole vocab needs no reduction across ranks.
llvm::Error noReduce(std::vector<double> &, bool) {
  return llvm::Error::success();
}

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

TEST(CpuKernels, AttentionIsCausalGroupedAndStaysInsideSegments) {
  const int64_t batch = 1, seq = 5, heads = 4, kvHeads = 2, dim = 3;
  std::vector<float> q = randomValues(seq * heads * dim, 4);
  std::vector<float> k = randomValues(seq * kvHeads * dim, 5);
  std::vector<float> v = randomValues(seq * kvHeads * dim, 6);
  const int32_t segments[] = {0, 0, 1, 1, 1};
  std::vector<float> out(q.size()), expected(q.size());
  double scale = 0.7;
  for (int64_t h = 0; h < heads; ++h) {
    int64_t kv = h / (heads / kvHeads);
    for (int64_t i = 0; i < seq; ++i) {
      std::vector<double> weights;
      double total = 0;
      for (int64_t j = 0; j < seq; ++j) {
        double weight = 0;
        if (j <= i && segments[j] == segments[i]) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot +=
                q[(i * heads + h) * dim + d] * k[(j * kvHeads + kv) * dim + d];
          weight = std::exp(dot * scale);
        }
        weights.push_back(weight);
        total += weight;
      }
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < seq; ++j)
          sum += weights[j] / total * v[(j * kvHeads + kv) * dim + d];
        expected[(i * heads + h) * dim + d] = float(sum);
      }
    }
  }
  cpu::attention(q.data(), k.data(), v.data(), segments, out.data(), batch, seq,
                 HeadBlock::whole(heads), kvHeads, dim, scale);
  expectNear(out, expected);
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

  std::vector<float> forward(int64_t budget) const {
    std::vector<float> out(q.size());
    cpu::attention(q.data(), k.data(), v.data(), segments.data(), out.data(),
                   batch, seq, heads, kvHeads, dim, scale, budget);
    return out;
  }
  /// L = sum(out * w).
  double loss() const {
    std::vector<float> out = forward(1 << 20);
    double total = 0;
    for (size_t i = 0; i < out.size(); ++i)
      total += double(out[i]) * w[i];
    return total;
  }
  std::vector<std::vector<float>> gradients(int64_t budget) const {
    std::vector<std::vector<float>> grads = {std::vector<float>(q.size()),
                                             std::vector<float>(k.size()),
                                             std::vector<float>(v.size())};
    cpu::attentionGrad(q.data(), k.data(), v.data(), w.data(), segments.data(),
                       grads[0].data(), grads[1].data(), grads[2].data(), batch,
                       seq, heads, kvHeads, dim, scale, budget);
    return grads;
  }
};

TEST(CpuKernels, AttentionChunksAgreeWithOneChunk) {
  AttentionCase c;
  // A budget of one byte makes chunks of one query; 1 MiB one chunk.
  expectNear(c.forward(1), c.forward(1 << 20));
  auto oneByOne = c.gradients(1), whole = c.gradients(1 << 20);
  for (int i = 0; i < 3; ++i)
    expectNear(oneByOne[i], whole[i]);
}

TEST(CpuKernels, AttentionGradientsMatchFiniteDifferences) {
  AttentionCase c;
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
          << "input " << input << " element " << i;
    }
  }
}

TEST(CpuKernels, CrossEntropySkipsIgnoredAndRejectsBadLabels) {
  const float logits[] = {0, 0, 0, 1, 2, 3, 5, 5, 5};
  const int32_t labels[] = {1, -100, 2};
  float loss;
  int64_t count;
  ASSERT_FALSE(cpu::crossEntropy(logits, labels, 3, VocabBlock::whole(3), -100,
                                 noReduce, &loss, &count));
  EXPECT_EQ(count, 2);
  EXPECT_NEAR(loss, 2 * std::log(3.0), 1e-6);

  const int32_t bad[] = {1, 7, 2};
  llvm::Error error = cpu::crossEntropy(logits, bad, 3, VocabBlock::whole(3),
                                        -100, noReduce, &loss, &count);
  EXPECT_THAT(llvm::toString(std::move(error)),
              HasSubstr("label 7 at position 1 is outside the vocabulary"));
}

/// linear_cross_entropy against cross_entropy of the whole logits: 11
/// rows in tiles of 4 (the last of 3), a block of 6 of a 10-column vocab
/// (its last 2 columns padding) and an ignored row.
TEST(CpuKernels, LinearCrossEntropyTilesAgreeWithWholeLogits) {
  const int64_t rows = 11, hidden = 5, columns = 6;
  TiledLogits shape{rows, hidden, 4, VocabBlock{columns, 6, 10}, 4, false};
  std::vector<float> input = randomValues(rows * hidden, 1);
  std::vector<float> weight = randomValues(columns * hidden, 2);
  std::vector<int32_t> labels = {0, 7, 3, 9, -100, 6, 2, 8, 1, 7, 6};
  std::vector<float> logits(rows * columns), tile(4 * columns);
  RowMajorGemm whole =
      shape.logits(input.data(), weight.data(), logits.data(), 0, rows);
  cpu::gemm(whole);

  float loss, tiledLoss;
  int64_t count, tiledCount;
  ASSERT_FALSE(cpu::crossEntropy(logits.data(), labels.data(), rows,
                                 shape.block, -100, noReduce, &loss, &count));
  ASSERT_FALSE(cpu::linearCrossEntropy(input.data(), weight.data(),
                                       labels.data(), shape, -100, noReduce,
                                       tile.data(), &tiledLoss, &tiledCount));
  EXPECT_EQ(tiledCount, count);
  EXPECT_NEAR(tiledLoss, loss, 1e-6 * std::abs(loss));

  // The gradients: dlogits times the weight, and dlogits^T times the input.
  std::vector<float> dlogits(rows * columns);
  ASSERT_FALSE(cpu::crossEntropyGrad(logits.data(), labels.data(), rows,
                                     shape.block, -100, noReduce, 0.37f,
                                     dlogits.data()));
  std::vector<float> inputGrad(rows * hidden), weightGrad(columns * hidden);
  cpu::gemm(shape.inputGrad(dlogits.data(), weight.data(), inputGrad.data(), 0,
                            rows));
  cpu::gemm(shape.weightGrad(dlogits.data(), input.data(), weightGrad.data(), 0,
                             rows));
  std::vector<float> tiled(rows * hidden);
  ASSERT_FALSE(cpu::linearCrossEntropyGrad(input.data(), weight.data(),
                                           labels.data(), shape, -100, noReduce,
                                           0.37f, tile.data(), tiled.data()));
  expectNear(tiled, inputGrad, 1e-6f);
  shape.wrtWeight = true;
  tiled.assign(columns * hidden, 0);
  ASSERT_FALSE(cpu::linearCrossEntropyGrad(input.data(), weight.data(),
                                           labels.data(), shape, -100, noReduce,
                                           0.37f, tile.data(), tiled.data()));
  expectNear(tiled, weightGrad, 1e-6f);
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

} // namespace
