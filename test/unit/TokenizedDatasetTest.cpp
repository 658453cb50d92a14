//===- TokenizedDatasetTest.cpp - JSONL reading and packing ---------------===//

#include "runtime/data/TokenizedDataset.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

std::string writeTemp(llvm::StringRef contents) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("twill-data", "jsonl", path));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << contents;
  return std::string(path);
}

TEST(TokenizedDataset, PacksExamplesWithTheirOwnPositionsAndSegments) {
  // Two examples fit one row of 8; the third starts the next row.
  std::vector<Example> examples = {{{1, 2, 3}, {-100, 2, 3}},
                                   {{4, 5, 6, 7}, {4, 5, 6, 7}},
                                   {{8, 9}, {8, 9}}};
  PackResult packed = packExamples(examples, 8, /*packed=*/true);
  ASSERT_EQ(packed.rows.size(), 2u);
  const Row &first = packed.rows[0];
  EXPECT_THAT(first.tokens, ElementsAre(1, 2, 3, 4, 5, 6, 7, 0));
  // Each position predicts the next label of its own example.
  EXPECT_THAT(first.labels, ElementsAre(2, 3, -100, 5, 6, 7, -100, -100));
  EXPECT_THAT(first.positions, ElementsAre(0, 1, 2, 0, 1, 2, 3, 0));
  EXPECT_THAT(first.segments, ElementsAre(0, 0, 0, 1, 1, 1, 1, 2));
  EXPECT_THAT(packed.rows[1].tokens, ElementsAre(8, 9, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(packed.rows[1].labels,
              ElementsAre(9, -100, -100, -100, -100, -100, -100, -100));
  EXPECT_EQ(packed.truncatedExamples, 0);
}

TEST(TokenizedDataset, UnpackedRowsAndTruncation) {
  std::vector<Example> examples = {{{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}},
                                   {{6}, {6}}};
  PackResult packed = packExamples(examples, 4, /*packed=*/false);
  ASSERT_EQ(packed.rows.size(), 2u);
  EXPECT_THAT(packed.rows[0].tokens, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(packed.rows[0].labels, ElementsAre(2, 3, 4, -100));
  EXPECT_THAT(packed.rows[1].tokens, ElementsAre(6, 0, 0, 0));
  EXPECT_EQ(packed.truncatedExamples, 1);
  EXPECT_EQ(packed.truncatedTokens, 1);
}

TEST(TokenizedDataset, ReadsJsonlAndNamesBadLines) {
  std::string good =
      writeTemp("{\"input_ids\": [1, 2], \"labels\": [-100, 2]}\n"
                "\n"
                "{\"input_ids\": [3]}\n");
  auto examples = readTokenizedJsonl(good);
  ASSERT_TRUE(bool(examples)) << llvm::toString(examples.takeError());
  ASSERT_EQ(examples->size(), 2u);
  EXPECT_THAT((*examples)[1].labels, ElementsAre(3));

  for (auto [contents, message] :
       {std::pair<const char *, const char *>{
            "{\"input_ids\": [1]}\n{\"input_ids\": [1, \"x\"]}\n",
            ":2: 'input_ids' must hold only 32-bit integers"},
        {"{\"input_ids\": [1, 2], \"labels\": [1]}\n",
         ":1: 'labels' has 1 entries, 'input_ids' 2"},
        {"{\"input_ids\": [1]\n", ":1: not valid JSON"},
        {"[1, 2]\n", ":1: expected a JSON object"}}) {
    std::string path = writeTemp(contents);
    auto bad = readTokenizedJsonl(path);
    ASSERT_FALSE(bool(bad));
    EXPECT_THAT(llvm::toString(bad.takeError()), HasSubstr(path + message));
  }
}

} // namespace
