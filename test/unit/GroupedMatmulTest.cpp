//===- GroupedMatmulTest.cpp - grouped_matmul against naive loops ---------===//
//
// The cpu runners of grouped_matmul and its weight's gradient against
// loops over every row in double, both weight layouts; the three
// products as each other's adjoints (the gradient's identities); what
// the runners refuse.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"
#include "test/unit/HostInstruction.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

using namespace twill;
using twill::test::HostInstruction;
using twill::test::problemOf;
using twill::test::randomValues;

namespace {

/// Two groups of 9 rows, 4 experts: the first group leaves its last row
/// to none and expert 1 none; the second gives every row to expert 3.
struct Grouped {
  static constexpr int64_t groups = 2, rows = 9, experts = 4, k = 5, n = 3;
  bool transposed;
  std::vector<int32_t> counts = {3, 0, 4, 1, 0, 0, 0, 9};
  std::vector<float> x = randomValues(groups * rows * k, 11);
  std::vector<float> weight = randomValues(experts * k * n, 12);
  std::vector<float> dy = randomValues(groups * rows * n, 13);

  /// Weight e's element (kk, nn) in its layout.
  float w(int64_t e, int64_t kk, int64_t nn) const {
    return weight[e * k * n + (transposed ? nn * k + kk : kk * n + nn)];
  }
  /// The expert of group g's row r, -1 past the counts.
  int64_t expertOf(int64_t g, int64_t r) const {
    for (int64_t e = 0, first = 0; e < experts; ++e) {
      first += counts[g * experts + e];
      if (r < first)
        return e;
    }
    return -1;
  }
  std::vector<int64_t> weightShape() const {
    return transposed ? std::vector<int64_t>{experts, n, k}
                      : std::vector<int64_t>{experts, k, n};
  }

  std::string forward(std::vector<float> &rowsIn, std::vector<float> &out,
                      std::vector<int64_t> inShape,
                      std::vector<int64_t> outShape, bool transpose) {
    HostInstruction in(GROUPED_MATMUL);
    in.operand(F32, inShape, rowsIn);
    in.operand(F32, weightShape(), weight);
    in.operand(I32, {groups, experts}, counts);
    in.result(F32, outShape, out);
    in->mutable_grouped_matmul()->set_transpose_rhs(transpose);
    return problemOf(cpu::runGroupedMatmul(in.view()));
  }
  std::string weightGrad(std::vector<float> &out) {
    HostInstruction in(GROUPED_MATMUL_WEIGHT_GRAD);
    in.operand(F32, {groups, rows, k}, x);
    in.operand(F32, {groups, rows, n}, dy);
    in.operand(I32, {groups, experts}, counts);
    in.result(F32, weightShape(), out);
    in->mutable_grouped_matmul()->set_transpose_rhs(transposed);
    return problemOf(cpu::runGroupedMatmulWeightGrad(in.view()));
  }
};

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += double(a[i]) * b[i];
  return sum;
}

TEST(GroupedMatmul, CpuRunnersAreTheNaiveLoops) {
  for (bool transposed : {false, true}) {
    Grouped c{transposed};
    const int64_t G = c.groups, R = c.rows, K = c.k, N = c.n;
    std::vector<float> y(G * R * N, -1), dw(c.weight.size(), -1);
    ASSERT_EQ(c.forward(c.x, y, {G, R, K}, {G, R, N}, transposed), "");
    ASSERT_EQ(c.weightGrad(dw), "");
    std::vector<double> expectedDw(dw.size());
    for (int64_t g = 0; g < G; ++g)
      for (int64_t r = 0; r < R; ++r) {
        int64_t e = c.expertOf(g, r), row = g * R + r;
        for (int64_t nn = 0; nn < N; ++nn) {
          double sum = 0;
          for (int64_t kk = 0; e >= 0 && kk < K; ++kk) {
            sum += double(c.x[row * K + kk]) * c.w(e, kk, nn);
            int64_t at = e * K * N + (transposed ? nn * K + kk : kk * N + nn);
            expectedDw[at] += double(c.x[row * K + kk]) * c.dy[row * N + nn];
          }
          EXPECT_NEAR(y[row * N + nn], sum, 1e-5) << g << " " << r;
        }
      }
    for (size_t i = 0; i < dw.size(); ++i)
      EXPECT_NEAR(dw[i], expectedDw[i], 1e-5) << i;
    // Expert 1 has no row: its gradient is zeros, not left as it was.
    EXPECT_EQ(dw[1 * K * N], 0.0f);
  }
}

TEST(GroupedMatmul, TheGradientsAreAdjoints) {
  // <x W, dy> = <x, dy W^T> = <W, dW(x, dy)> over the routed rows.
  for (bool transposed : {false, true}) {
    Grouped c{transposed};
    const int64_t G = c.groups, R = c.rows, K = c.k, N = c.n;
    std::vector<float> y(G * R * N), dx(G * R * K), dw(c.weight.size());
    ASSERT_EQ(c.forward(c.x, y, {G, R, K}, {G, R, N}, transposed), "");
    ASSERT_EQ(c.forward(c.dy, dx, {G, R, N}, {G, R, K}, !transposed), "");
    ASSERT_EQ(c.weightGrad(dw), "");
    double forward = dot(y, c.dy);
    EXPECT_NEAR(dot(c.x, dx), forward, 1e-5 * std::fabs(forward) + 1e-6);
    EXPECT_NEAR(dot(c.weight, dw), forward, 1e-5 * std::fabs(forward) + 1e-6);
  }
}

TEST(GroupedMatmul, CpuRunnersRefuseBadCounts) {
  Grouped c{true};
  std::vector<float> y(c.groups * c.rows * c.n);
  c.counts[2] = -1;
  EXPECT_EQ(c.forward(c.x, y, {2, 9, 5}, {2, 9, 3}, true),
            "grouped_matmul: group 0 gives expert 2 -1 rows");
  c.counts[2] = 4, c.counts[7] = 10;
  EXPECT_EQ(c.forward(c.x, y, {2, 9, 5}, {2, 9, 3}, true),
            "grouped_matmul: group 1's counts sum to 10, past its 9 rows");
  EXPECT_EQ(c.forward(c.x, y, {2, 9, 5}, {2, 9, 3}, false),
            "grouped_matmul: weight must have shape [4, 5, 3], got [4, 3, 5]");
}

} // namespace
