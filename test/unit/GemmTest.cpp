//===- GemmTest.cpp - the GEMMs the backends hand their libraries ---------===//
//
// Every matmul shape and every GEMM of the attention schedule, computed
// three ways against a plain reference: by oneDNN from the row-major
// description (the cpu backend), and by two emulations of column-major
// libraries reading exactly the arguments the cuda backend passes: cuBLAS's
// strided-batched GEMM (toColumnMajor) and cuBLASLt's matrix layouts
// (storedMatrices). So the GPU's argument mapping is checked here, where no
// GPU is.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/ChunkedAttention.h"
#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/MatmulShape.h"

#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using namespace twill;

namespace {

using test::expectNear;
using test::randomValues;

/// cuBLAS's cublasGemmStridedBatchedEx on fp32, element by element.
void columnMajorGemm(const ColumnMajorGemm &g, float alpha, float beta) {
  auto *a = static_cast<const float *>(g.a);
  auto *b = static_cast<const float *>(g.b);
  auto *c = static_cast<float *>(g.c);
  for (int64_t x = 0; x < g.batch; ++x)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l)
          sum += double(a[x * g.strideA +
                          (g.transA ? l + i * g.lda : i + l * g.lda)]) *
                 b[x * g.strideB + (g.transB ? j + l * g.ldb : l + j * g.ldb)];
        float &out = c[x * g.strideC + i + j * g.ldc];
        out = float(alpha * sum + (beta != 0 ? beta * out : 0));
      }
}

/// cuBLASLt's cublasLtMatmul, reading its operands only through the
/// layouts (rows, columns, ld, batch, stride) and the transposes; D = C.
void ltMatmul(const ColumnMajorGemm &g, float alpha, float beta) {
  auto [layoutA, layoutB, layoutC] = storedMatrices(g);
  auto at = [](const StoredMatrix &layout, const void *base, int64_t x,
               int64_t row, int64_t column) {
    EXPECT_LT(row, layout.rows);
    EXPECT_LT(column, layout.columns);
    EXPECT_GE(layout.ld, layout.rows);
    return static_cast<const float *>(
        base)[x * layout.stride + row + column * layout.ld];
  };
  EXPECT_EQ(layoutC.rows, g.m);
  EXPECT_EQ(layoutC.columns, g.n);
  for (int64_t x = 0; x < layoutC.batch; ++x)
    for (int64_t i = 0; i < layoutC.rows; ++i)
      for (int64_t j = 0; j < layoutC.columns; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l)
          sum += double(g.transA ? at(layoutA, g.a, x, l, i)
                                 : at(layoutA, g.a, x, i, l)) *
                 (g.transB ? at(layoutB, g.b, x, j, l)
                           : at(layoutB, g.b, x, l, j));
        float &out =
            static_cast<float *>(g.c)[x * layoutC.stride + i + j * layoutC.ld];
        out = float(alpha * sum + (beta != 0 ? beta * out : 0));
      }
}

TEST(Gemm, EveryMatmulShapeMapsTheSameOnEveryLibrary) {
  const int64_t batch = 3, m = 4, n = 5, k = 6;
  for (bool transposeLhs : {false, true})
    for (bool transposeRhs : {false, true})
      for (bool rhsBatched : {false, true})
        for (bool addend : {false, true}) {
          std::vector<float> lhs = randomValues(batch * m * k, 1);
          std::vector<float> rhs =
              randomValues((rhsBatched ? batch : 1) * k * n, 2);
          std::vector<float> start = randomValues(batch * m * n, 3);
          std::vector<float> expected(batch * m * n);
          float alpha = 0.75f;
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                double sum = 0;
                for (int64_t p = 0; p < k; ++p) {
                  float x = transposeLhs ? lhs[b * m * k + p * m + i]
                                         : lhs[b * m * k + i * k + p];
                  int64_t base = rhsBatched ? b * k * n : 0;
                  float w = transposeRhs ? rhs[base + j * k + p]
                                         : rhs[base + p * n + j];
                  sum += double(x) * w;
                }
                int64_t at = (b * m + i) * n + j;
                expected[at] = float(alpha * sum + (addend ? start[at] : 0));
              }
          MatmulShape shape{
              batch,        m,          n,      k,     transposeLhs,
              transposeRhs, rhsBatched, addend, alpha, addend ? 3 : 2};
          SCOPED_TRACE(::testing::Message()
                       << transposeLhs << transposeRhs << rhsBatched << addend);
          std::vector<float> out = start;
          RowMajorGemm rowMajor =
              matmulGemm(shape, lhs.data(), rhs.data(), out.data());
          cpu::gemm(rowMajor);
          expectNear(out, expected);
          for (auto library : {columnMajorGemm, ltMatmul}) {
            out = start;
            library(toColumnMajor(rowMajor), alpha, addend ? 1.0f : 0.0f);
            expectNear(out, expected);
          }
        }
}

TEST(Gemm, ABatchContractedMatmulMapsTheSame) {
  // The weight gradient of a shared weight: lhs [b, k, m] transposed times
  // rhs [b, k, n], summed over the batch into [m, n].
  const int64_t batch = 3, m = 4, n = 5, k = 2;
  std::vector<float> lhs = randomValues(batch * k * m, 4);
  std::vector<float> rhs = randomValues(batch * k * n, 5);
  std::vector<float> expected(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t p = 0; p < k; ++p)
          sum += double(lhs[(b * k + p) * m + i]) * rhs[(b * k + p) * n + j];
      expected[i * n + j] = float(sum);
    }
  MatmulShape shape{1, m, n, batch * k, true, false, false, false, 1.0, 2};
  std::vector<float> out(m * n);
  RowMajorGemm rowMajor = matmulGemm(shape, lhs.data(), rhs.data(), out.data());
  cpu::gemm(rowMajor);
  expectNear(out, expected);
  for (auto library : {columnMajorGemm, ltMatmul}) {
    std::fill(out.begin(), out.end(), 0.0f);
    library(toColumnMajor(rowMajor), 1.0f, 0.0f);
    expectNear(out, expected);
  }
}

/// The cpu attention operations with their GEMMs done as the cuda backend
/// hands them to cuBLAS.
struct ColumnMajorAttentionOps {
  static constexpr int64_t kMaxChunkRows = 512; // the cuda backend's
  std::vector<std::vector<float>> slots;
  void *scratch(int slot, int64_t bytes) {
    if ((int)slots.size() <= slot)
      slots.resize(slot + 1);
    slots[slot].resize((bytes + 3) / 4);
    return slots[slot].data();
  }
  void gemm(const RowMajorGemm &g) {
    columnMajorGemm(toColumnMajor(g), g.alpha, g.accumulate ? 1.0f : 0.0f);
  }
  void softmaxRows(const SoftmaxRows &rows) { cpu::softmaxRows(rows); }
  void probabilityRows(const SoftmaxRows &rows) { cpu::probabilityRows(rows); }
  void softmaxGradRows(const SoftmaxRows &rows) { cpu::softmaxGradRows(rows); }
  template <typename Each> void forEachGroup(int64_t groups, Each each) {
    for (int64_t group = 0; group < groups; ++group) // as the cuda backend
      each(group);
  }
  void copyRows(const void *from, int64_t fromStride, void *to,
                int64_t toStride, int64_t rows, int64_t width) {
    for (int64_t r = 0; r < rows; ++r) // as cudaMemcpy2DAsync
      std::copy_n(static_cast<const float *>(from) + r * fromStride, width,
                  static_cast<float *>(to) + r * toStride);
  }
  void zero(float *values, int64_t count) { std::fill_n(values, count, 0.0f); }
  void store(const float *from, void *to, int64_t count) {
    std::copy_n(from, count, static_cast<float *>(to));
  }
};

TEST(Gemm, AttentionScheduleMapsTheSameOnColumnMajorGemms) {
  const int64_t batch = 2, seq = 9, kvHeads = 2, dim = 4;
  HeadBlock heads{3, 1, 4};
  std::vector<float> q = randomValues(batch * seq * 3 * dim, 6);
  std::vector<float> k = randomValues(batch * seq * kvHeads * dim, 7);
  std::vector<float> v = randomValues(batch * seq * kvHeads * dim, 8);
  std::vector<float> dOut = randomValues(q.size(), 9);
  std::vector<int32_t> segments = {0, 0, 0, 1, 1, 1, 1, 2, 2,
                                   4, 4, 5, 5, 5, 5, 5, 5, 5};
  AttentionProblem problem{q.data(), k.data(), v.data(), segments.data(),
                           batch,    seq,      kvHeads,  dim,
                           heads,    sizeof(float), {0.5}};
  const int64_t budget = 3 * seq * 16; // a few queries per chunk
  // Without a window, and with one of 4 that a segment of 7 crosses (the
  // chunks' key rows then start past 0).
  for (int64_t window : {0, 4}) {
    problem.logits.window = window;
    problem.logits.softcap = window ? 1.5 : 0; // and soft-capped logits
    std::vector<float> out(q.size()), expected(q.size());
    std::vector<float> lse(batch * heads.count * seq), expectedLse(lse.size());
    ColumnMajorAttentionOps ops;
    problem.logSumExp = lse.data();
    chunkedAttention(ops, problem, out.data(), budget);
    cpu::attention(q.data(), k.data(), v.data(), segments.data(),
                   expected.data(), expectedLse.data(), batch, seq, heads,
                   kvHeads, dim, problem.logits);
    expectNear(out, expected);
    expectNear(lse, expectedLse);

    std::vector<std::vector<float>> grads(3), expectedGrads(3);
    for (int i = 0; i < 3; ++i) {
      grads[i].resize(i == 0 ? q.size() : k.size());
      expectedGrads[i].resize(grads[i].size());
    }
    chunkedAttentionGrad(ops, problem, dOut.data(), grads[0].data(),
                         grads[1].data(), grads[2].data(), budget);
    cpu::attentionGrad(q.data(), k.data(), v.data(), expectedLse.data(),
                       dOut.data(), segments.data(), expectedGrads[0].data(),
                       expectedGrads[1].data(), expectedGrads[2].data(), batch,
                       seq, heads, kvHeads, dim,
                       problem.logits);
    for (int i = 0; i < 3; ++i)
      expectNear(grads[i], expectedGrads[i]);
  }
}

} // namespace

// cuBLASLt is told each operand's alignment, never more than it has: a
// tile of logits rows starts at first * hidden * 2 bytes into a bf16 value
// that starts on 64 bytes, and a batch's matrices each start a stride on.
TEST(Gemm, QuantizedMatmulPanelsMapTheSameOnEveryLibrary) {
  // A quantized matmul's weight [rows, columns] a panel of rows at a time:
  // x W^T panel by panel of result columns, dy W panel by panel of the
  // sum, onto the addend; panels of 1, 3 and all 7 rows. On the cpu
  // through panelProduct, which starts from the addend (or zeros).
  const int64_t batch = 2, m = 3, rows = 7, columns = 5;
  std::vector<float> weight = randomValues(rows * columns, 6);
  for (bool transposed : {true, false})
    for (int64_t panelRows : {1, 3, 7}) {
      int64_t k = transposed ? columns : rows, n = transposed ? rows : columns;
      std::vector<float> lhs = randomValues(batch * m * k, 7);
      std::vector<float> start = randomValues(batch * m * n, 8);
      std::vector<float> expected(batch * m * n);
      float alpha = 0.5f;
      for (int64_t i = 0; i < batch * m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum +=
                double(lhs[i * k + p]) * (transposed ? weight[j * columns + p]
                                                     : weight[p * columns + j]);
          expected[i * n + j] = float(alpha * sum + start[i * n + j]);
        }
      QuantizedMatmulShape shape;
      shape.product = {batch,      m,     n,    k,     false,
                       transposed, false, true, alpha, 3};
      shape.rows = rows, shape.columns = columns;
      SCOPED_TRACE(::testing::Message() << transposed << panelRows);
      auto panelOf = [&](int64_t first, int64_t count, float *panel) {
        std::copy_n(weight.begin() + first * columns, count * columns, panel);
      };
      for (bool addend : {true, false}) {
        std::vector<float> out(start.size(), -1.0f), want = expected;
        if (!addend)
          for (size_t i = 0; i < want.size(); ++i)
            want[i] -= start[i];
        cpu::panelProduct(rows, columns, panelRows,
                          addend ? start.data() : nullptr, out.data(),
                          int64_t(out.size()), panelOf,
                          [&](int64_t first, int64_t count, const float *p) {
                            return panelGemm(shape, first, count, lhs.data(), p,
                                             out.data(), sizeof(float));
                          });
        expectNear(out, want);
      }
      for (int library = 1; library < 3; ++library) {
        std::vector<float> out = start;
        for (int64_t first = 0; first < rows; first += panelRows) {
          int64_t count = std::min(panelRows, rows - first);
          std::vector<float> panel(weight.begin() + first * columns,
                                   weight.begin() + (first + count) * columns);
          RowMajorGemm g = panelGemm(shape, first, count, lhs.data(),
                                     panel.data(), out.data(), sizeof(float));
          ASSERT_TRUE(g.accumulate);
          (library == 1 ? columnMajorGemm : ltMatmul)(toColumnMajor(g), alpha,
                                                      1.0f);
        }
        expectNear(out, expected);
      }
    }
}

TEST(Gemm, OperandAlignmentIsWhatEveryMatrixOfTheBatchHas) {
  alignas(256) static char memory[4096];
  EXPECT_EQ(alignmentOf(memory, 0), 256u); // never more than cuBLASLt asks
  EXPECT_EQ(alignmentOf(memory + 64, 0), 64u);
  EXPECT_EQ(alignmentOf(memory + 7 * 48 * 2, 0), 32u); // row 7 of 48 (bf16)
  EXPECT_EQ(alignmentOf(memory + 2, 0), 2u);
  EXPECT_EQ(alignmentOf(memory, 3 * 4), 4u); // every third fp32 element
  EXPECT_EQ(alignmentOf(memory + 128, 1024), 128u);

  RowMajorGemm rowMajor;
  rowMajor.m = 5, rowMajor.n = 6, rowMajor.k = 7;
  rowMajor.a = memory + 7 * 48 * 2, rowMajor.lda = 7;
  rowMajor.b = memory + 1024, rowMajor.ldb = 7, rowMajor.transB = true;
  rowMajor.c = memory + 2048 + 16, rowMajor.ldc = 6;
  ColumnMajorGemm g = toColumnMajor(rowMajor);
  // Column-major A is the row-major B: the operands swap.
  std::array<uint32_t, 4> alignments = gemmAlignments(g, nullptr, 2);
  EXPECT_EQ(alignments, (std::array<uint32_t, 4>{256, 32, 16, 16}));
  EXPECT_EQ(gemmAlignments(g, memory + 3072, 2)[2], 256u);
  rowMajor.batch = 3, rowMajor.strideA = 5 * 7; // 70 bytes apart
  g = toColumnMajor(rowMajor);
  EXPECT_EQ(gemmAlignments(g, nullptr, 2)[1], 2u);
}
