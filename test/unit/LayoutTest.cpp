//===- LayoutTest.cpp - one rank's block of a split tensor ----------------===//

#include "runtime/executable/Layout.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <numeric>

using namespace twill;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

Mesh mesh2x2() {
  Mesh mesh;
  mesh.add_axes("dp");
  mesh.add_axes("tp");
  mesh.add_shape(2);
  mesh.add_shape(2);
  return mesh;
}

/// A [5, 7] tensor whose dim 0 both axes split, held as [2, 7] blocks.
Buffer splitBuffer() {
  Buffer buffer;
  buffer.set_name("w");
  for (int64_t size : {5, 7})
    buffer.add_global_shape(size);
  buffer.add_split_dims(0);
  buffer.add_split_dims(0);
  for (int64_t size : {2, 7})
    buffer.add_shape(size);
  return buffer;
}

TEST(Layout, TpSplitsFirstThenDpAndTheLastBlocksArePadding) {
  // tp splits the 5 rows into 3 + 2; dp splits each into 2 + 1 and 2 + 0.
  std::vector<std::pair<int64_t, int64_t>> rows; // (offset, extent)
  for (int dp = 0; dp < 2; ++dp)
    for (int tp = 0; tp < 2; ++tp) {
      auto block = blockOf(splitBuffer(), mesh2x2(), {dp, tp});
      ASSERT_TRUE(bool(block)) << llvm::toString(block.takeError());
      EXPECT_THAT(block->localShape, ElementsAre(2, 7));
      EXPECT_TRUE(block->primary);
      rows.push_back({block->offset[0], block->extent[0]});
    }
  EXPECT_THAT(rows, ElementsAre(std::pair<int64_t, int64_t>{0, 2},
                                std::pair<int64_t, int64_t>{3, 2},
                                std::pair<int64_t, int64_t>{2, 1},
                                std::pair<int64_t, int64_t>{5, 0}));
}

TEST(Layout, BlocksPutBackTogetherMakeTheWhole) {
  std::vector<float> whole(35);
  std::iota(whole.begin(), whole.end(), 1.0f);
  std::vector<float> rebuilt(35, 0.0f);
  for (int dp = 0; dp < 2; ++dp)
    for (int tp = 0; tp < 2; ++tp) {
      auto block = blockOf(splitBuffer(), mesh2x2(), {dp, tp});
      ASSERT_TRUE(bool(block));
      std::vector<float> local(14, -1.0f);
      sliceBlock<float>(whole, *block, local);
      // Padding rows are zero.
      for (int64_t i = block->extent[0] * 7; i < 14; ++i)
        EXPECT_EQ(local[i], 0.0f);
      addBlock(local, *block, rebuilt);
    }
  EXPECT_EQ(rebuilt, whole);
}

TEST(Layout, AReplicatedAxisHasOnePrimaryHolder) {
  Buffer buffer;
  buffer.add_global_shape(6);
  buffer.add_split_dims(0);  // dp
  buffer.add_split_dims(-1); // whole on tp
  buffer.add_shape(3);
  auto first = blockOf(buffer, mesh2x2(), {1, 0});
  auto second = blockOf(buffer, mesh2x2(), {1, 1});
  ASSERT_TRUE(bool(first) && bool(second));
  EXPECT_TRUE(first->primary);
  EXPECT_FALSE(second->primary);
  EXPECT_EQ(first->offset, second->offset);
}

// A scalar placed on the mesh (an NF4 weight's offset) is whole on every
// rank, and held first by rank (0, 0) alone: a whole put together from
// every rank counts it once.
TEST(Layout, APlacedScalarHasOnePrimaryHolder) {
  Buffer scalar;
  scalar.add_split_dims(-1);
  scalar.add_split_dims(-1);
  int primaries = 0;
  for (int dp = 0; dp < 2; ++dp)
    for (int tp = 0; tp < 2; ++tp) {
      auto block = blockOf(scalar, mesh2x2(), {dp, tp});
      ASSERT_TRUE(bool(block)) << llvm::toString(block.takeError());
      EXPECT_TRUE(block->globalShape.empty());
      primaries += block->primary;
      EXPECT_EQ(block->primary, dp == 0 && tp == 0);
    }
  EXPECT_EQ(primaries, 1);
}

TEST(Layout, AShapeThatIsNotTheBlockIsAnError) {
  Buffer buffer = splitBuffer();
  buffer.set_shape(0, 3);
  auto block = blockOf(buffer, mesh2x2(), {0, 0});
  ASSERT_FALSE(bool(block));
  EXPECT_THAT(llvm::toString(block.takeError()),
              HasSubstr("buffer 'w': its shape is not its block"));
}

} // namespace
