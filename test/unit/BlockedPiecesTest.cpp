//===- BlockedPiecesTest.cpp - a blocked split's layout -------------------===//

#include "support/BlockedPieces.h"

#include <gtest/gtest.h>

namespace twill {
static bool operator==(const PieceRun &a, const PieceRun &b) {
  return a.piece == b.piece && a.wholeStart == b.wholeStart &&
         a.pieceStart == b.pieceStart && a.length == b.length;
}
} // namespace twill

using namespace twill;

namespace {

TEST(BlockedPieces, OneBlockIsConsecutivePieces) {
  auto runs = blockedPieceRuns(7, 1, {4, 3});
  ASSERT_TRUE(bool(runs)) << llvm::toString(runs.takeError());
  std::vector<PieceRun> expected = {{0, 0, 0, 4}, {1, 4, 0, 3}};
  EXPECT_EQ(*runs, expected);
}

// 30 positions in 4 blocks of 8 (the last of 6), each cut 5 + 3: what rank
// r of a dim sharded 4 ways holds, it cuts itself.
TEST(BlockedPieces, EachBlockIsCutTheSameWay) {
  EXPECT_EQ(blockedPieceSizes(30, 4, {5, 3}), (std::vector<int64_t>{20, 10}));
  auto runs = blockedPieceRuns(30, 4, {20, 10});
  ASSERT_TRUE(bool(runs)) << llvm::toString(runs.takeError());
  std::vector<PieceRun> expected = {
      {0, 0, 0, 5},   {1, 5, 0, 3},   {0, 8, 5, 5},   {1, 13, 3, 3},
      {0, 16, 10, 5}, {1, 21, 6, 3},  {0, 24, 15, 5}, {1, 29, 9, 1}};
  EXPECT_EQ(*runs, expected);
}

// Every piece's local block (ceil(size / blocks)) is its chunk, so a
// sharded split is local, whatever the sizes: the last blocks short or
// empty included.
TEST(BlockedPieces, EveryLayoutIsRecoveredFromItsPieceSizes) {
  for (int64_t whole = 1; whole <= 40; ++whole)
    for (int64_t blocks = 1; blocks <= 8; ++blocks) {
      int64_t block = (whole + blocks - 1) / blocks;
      for (int64_t chunk = 1; chunk <= block; ++chunk) {
        std::vector<int64_t> chunks;
        for (int64_t start = 0; start < block; start += chunk)
          chunks.push_back(std::min(chunk, block - start));
        std::vector<int64_t> sizes = blockedPieceSizes(whole, blocks, chunks);
        auto runs = blockedPieceRuns(whole, blocks, sizes);
        ASSERT_TRUE(bool(runs)) << whole << " in " << blocks << " blocks, "
                                << "chunks of " << chunk << ": "
                                << llvm::toString(runs.takeError());
        std::vector<int> covered(whole, 0);
        for (const PieceRun &run : *runs)
          for (int64_t i = 0; i < run.length; ++i)
            ++covered[run.wholeStart + i];
        for (int64_t i = 0; i < whole; ++i)
          ASSERT_EQ(covered[i], 1) << "position " << i;
      }
    }
}

TEST(BlockedPieces, SizesThatDoNotFitAreRefused) {
  auto shortPieces = blockedPieceRuns(7, 1, {4, 2});
  ASSERT_FALSE(bool(shortPieces));
  EXPECT_EQ(llvm::toString(shortPieces.takeError()),
            "pieces cover 6 of 7 positions");
  // 10 in 3 blocks of 4 (4, 4, 2), chunks 3 + 1: the first piece holds 8.
  auto miscounted = blockedPieceRuns(10, 3, {7, 3});
  ASSERT_FALSE(bool(miscounted));
  EXPECT_EQ(llvm::toString(miscounted.takeError()),
            "piece 0 has 7 positions, its chunks 8");
  EXPECT_FALSE(bool(blockedPieceRuns(10, 0, {10})));
  llvm::consumeError(blockedPieceRuns(10, 0, {10}).takeError());
}

} // namespace
