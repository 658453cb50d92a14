//===- DispatchTest.cpp - dispatch and combine against naive loops --------===//
//
// support/Dispatch.h's sort of a group's slots against a stable sort, and
// the cpu runners of expert_positions, dispatch, combine and
// combine_weights_grad against loops over every slot in double; dispatch
// and combine as each other's adjoint; what the runners refuse.
//
//===----------------------------------------------------------------------===//

#include "support/Dispatch.h"
#include "runtime/backend/cpu/CpuOps.h"
#include "test/unit/HostInstruction.h"
#include "test/unit/RandomValues.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace twill;
using twill::test::HostInstruction;
using twill::test::problemOf;
using twill::test::randomValues;

namespace {

/// The reference: the slots stably sorted by expert; slot s's row is its
/// place in that order.
void naivePositions(const std::vector<int32_t> &indices, int64_t experts,
                    std::vector<int32_t> &positions,
                    std::vector<int32_t> &counts) {
  std::vector<int32_t> order(indices.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return indices[a] < indices[b];
  });
  positions.assign(indices.size(), 0);
  for (size_t row = 0; row < order.size(); ++row)
    positions[order[row]] = row;
  counts.assign(experts, 0);
  for (int32_t e : indices)
    ++counts[e];
}

/// Each slot's expert, for `groups` groups: random, except that expert 1
/// gets no token and, in the last group, every slot goes to expert 3.
std::vector<int32_t> someIndices(int64_t groups, int64_t slots,
                                 int64_t experts) {
  std::vector<float> random = randomValues(groups * slots, 5);
  std::vector<int32_t> indices;
  for (float value : random) {
    int32_t e = int32_t(std::fabs(value) * 1000) % experts;
    indices.push_back(e == 1 ? 0 : e);
  }
  std::fill(indices.end() - slots, indices.end(), 3);
  return indices;
}

TEST(Dispatch, PositionsAreAStableSortByExpert) {
  const int64_t slots = 37, experts = 6;
  for (const std::vector<int32_t> &group :
       {someIndices(1, slots, experts), std::vector<int32_t>(slots, 5),
        std::vector<int32_t>(slots, 0)}) {
    std::vector<int32_t> positions(slots), counts(experts), expected,
        expectedCounts;
    dispatch::expertPositions(group.data(), slots, experts, positions.data(),
                              counts.data());
    naivePositions(group, experts, expected, expectedCounts);
    EXPECT_EQ(positions, expected);
    EXPECT_EQ(counts, expectedCounts);
  }
  // An index outside the experts takes no row.
  std::vector<int32_t> group = {2, 7, 0, -1, 2}, positions(5), counts(3);
  dispatch::expertPositions(group.data(), 5, 3, positions.data(),
                            counts.data());
  EXPECT_EQ(positions, (std::vector<int32_t>{1, -1, 0, -1, 2}));
  EXPECT_EQ(counts, (std::vector<int32_t>{1, 0, 2}));
}

/// A group's runs: expert_positions, dispatch with weights, combine with
/// them, combine_weights_grad, over host buffers.
struct Layer {
  static constexpr int64_t groups = 3, tokens = 7, k = 2, experts = 5,
                           width = 6, slots = tokens * k;
  std::vector<int32_t> indices = someIndices(groups, slots, experts);
  std::vector<int32_t> positions = std::vector<int32_t>(groups * slots);
  std::vector<int32_t> counts = std::vector<int32_t>(groups * experts);
  std::vector<float> input = randomValues(groups * tokens * width, 6);
  std::vector<float> weights = randomValues(groups * slots, 7);
  std::vector<float> rows = std::vector<float>(groups * slots * width);
  std::vector<float> output = std::vector<float>(groups * tokens * width);
  std::vector<float> weightsGrad = std::vector<float>(groups * slots);

  std::string run(Opcode opcode, std::vector<float> &from,
                  std::vector<float> &to) {
    HostInstruction in(opcode);
    bool toRows = opcode == DISPATCH;
    in.operand(F32, toRows ? tokensShape() : rowsShape(), from);
    in.operand(I32, {groups, tokens, k}, positions);
    in.operand(F32, {groups, tokens, k}, weights);
    in.result(F32, toRows ? rowsShape() : tokensShape(), to);
    return problemOf(opcode == DISPATCH ? cpu::runDispatch(in.view())
                                        : cpu::runCombine(in.view()));
  }
  std::vector<int64_t> tokensShape() const { return {groups, tokens, width}; }
  std::vector<int64_t> rowsShape() const { return {groups, slots, width}; }
};

TEST(Dispatch, CpuRunnersAreTheNaiveLoops) {
  Layer layer;
  HostInstruction sort(EXPERT_POSITIONS);
  sort.operand(I32, {Layer::groups, Layer::tokens, Layer::k}, layer.indices);
  sort.result(I32, {Layer::groups, Layer::tokens, Layer::k}, layer.positions);
  sort.result(I32, {Layer::groups, Layer::experts}, layer.counts);
  ASSERT_EQ(problemOf(cpu::runExpertPositions(sort.view())), "");
  for (int64_t g = 0; g < Layer::groups; ++g) {
    std::vector<int32_t> group(layer.indices.begin() + g * Layer::slots,
                               layer.indices.begin() + (g + 1) * Layer::slots);
    std::vector<int32_t> expected, expectedCounts;
    naivePositions(group, Layer::experts, expected, expectedCounts);
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(),
                           layer.positions.begin() + g * Layer::slots));
    EXPECT_TRUE(std::equal(expectedCounts.begin(), expectedCounts.end(),
                           layer.counts.begin() + g * Layer::experts));
  }

  ASSERT_EQ(layer.run(DISPATCH, layer.input, layer.rows), "");
  ASSERT_EQ(layer.run(COMBINE, layer.rows, layer.output), "");
  HostInstruction grad(COMBINE_WEIGHTS_GRAD);
  grad.operand(F32, layer.rowsShape(), layer.rows);
  grad.operand(I32, {Layer::groups, Layer::tokens, Layer::k}, layer.positions);
  grad.operand(F32, layer.tokensShape(), layer.output);
  grad.result(F32, {Layer::groups, Layer::tokens, Layer::k}, layer.weightsGrad);
  ASSERT_EQ(problemOf(cpu::runCombineWeightsGrad(grad.view())), "");

  const int64_t width = Layer::width, k = Layer::k;
  for (int64_t g = 0; g < Layer::groups; ++g)
    for (int64_t t = 0; t < Layer::tokens; ++t) {
      int64_t token = g * Layer::tokens + t;
      for (int64_t h = 0; h < width; ++h) {
        // Each slot's row is its token times its weight; the token's
        // output, its rows times their weights: the input times the sum
        // of its weights' squares.
        double squares = 0;
        for (int64_t j = 0; j < k; ++j) {
          int64_t slot = token * k + j;
          int64_t row = g * Layer::slots + layer.positions[slot];
          double expected =
              double(layer.input[token * width + h]) * layer.weights[slot];
          EXPECT_NEAR(layer.rows[row * width + h], expected, 1e-6);
          squares += double(layer.weights[slot]) * layer.weights[slot];
        }
        EXPECT_NEAR(layer.output[token * width + h],
                    layer.input[token * width + h] * squares, 1e-5);
      }
      for (int64_t j = 0; j < k; ++j) {
        int64_t slot = token * k + j;
        int64_t row = g * Layer::slots + layer.positions[slot];
        double dot = 0;
        for (int64_t h = 0; h < width; ++h)
          dot += double(layer.rows[row * width + h]) *
                 layer.output[token * width + h];
        EXPECT_NEAR(layer.weightsGrad[slot], dot, 1e-5);
      }
    }
}

TEST(Dispatch, DispatchAndCombineAreAdjoint) {
  // <dispatch(x), r> = <x, combine(r)>, with the same positions and
  // weights: each is the other's gradient.
  Layer layer;
  for (int64_t g = 0; g < Layer::groups; ++g)
    dispatch::expertPositions(layer.indices.data() + g * Layer::slots,
                              Layer::slots, Layer::experts,
                              layer.positions.data() + g * Layer::slots,
                              layer.counts.data() + g * Layer::experts);
  std::vector<float> r = randomValues(layer.rows.size(), 8);
  ASSERT_EQ(layer.run(DISPATCH, layer.input, layer.rows), "");
  ASSERT_EQ(layer.run(COMBINE, r, layer.output), "");
  double left = 0, right = 0;
  for (size_t i = 0; i < r.size(); ++i)
    left += double(layer.rows[i]) * r[i];
  for (size_t i = 0; i < layer.input.size(); ++i)
    right += double(layer.input[i]) * layer.output[i];
  EXPECT_NEAR(left, right, 1e-4 * std::fabs(left));
}

// A slot without a row (position -1) leaves a row no slot writes: zeros,
// whatever the buffer held; with every slot placed, every row is written.
TEST(Dispatch, RowsNoSlotWritesAreZeros) {
  Layer layer;
  for (int64_t s = 0; s < int64_t(layer.positions.size()); ++s)
    layer.positions[s] = s % Layer::slots;
  layer.positions[Layer::slots + 4] = -1; // group 1's row 4 is no slot's
  std::fill(layer.rows.begin(), layer.rows.end(), std::nanf(""));
  ASSERT_EQ(layer.run(DISPATCH, layer.input, layer.rows), "");
  for (int64_t row = 0; row < Layer::groups * Layer::slots; ++row)
    for (int64_t h = 0; h < Layer::width; ++h) {
      float value = layer.rows[row * Layer::width + h];
      if (row == Layer::slots + 4)
        EXPECT_EQ(value, 0.0f) << row;
      else
        EXPECT_FALSE(std::isnan(value)) << row;
    }
}

TEST(Dispatch, CpuRunnersRefuseBadIndicesAndPositions) {
  Layer layer;
  layer.indices[4] = Layer::experts;
  HostInstruction sort(EXPERT_POSITIONS);
  sort.operand(I32, {Layer::groups, Layer::tokens, Layer::k}, layer.indices);
  sort.result(I32, {Layer::groups, Layer::tokens, Layer::k}, layer.positions);
  sort.result(I32, {Layer::groups, Layer::experts}, layer.counts);
  EXPECT_EQ(problemOf(cpu::runExpertPositions(sort.view())),
            "expert_positions: index 4 names expert 5 of 5");

  std::iota(layer.positions.begin(), layer.positions.end(), 0);
  EXPECT_EQ(layer.run(DISPATCH, layer.input, layer.rows),
            "dispatch: position 14 is row 14 of 14");
  for (int64_t s = 0; s < int64_t(layer.positions.size()); ++s)
    layer.positions[s] = s % Layer::slots;
  layer.positions[3] = 2;
  EXPECT_EQ(layer.run(DISPATCH, layer.input, layer.rows),
            "dispatch: position 3 is row 2 again");
  // combine only reads rows: a row read twice is no error.
  EXPECT_EQ(layer.run(COMBINE, layer.rows, layer.output), "");
  layer.positions[5] = -2;
  EXPECT_EQ(layer.run(COMBINE, layer.rows, layer.output),
            "combine: position 5 is row -2 of 14");
}

} // namespace
