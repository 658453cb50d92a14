//===- PreferenceRowsTest.cpp - DPO's rows of preference pairs ------------===//

#include "runtime/data/PreferenceDataset.h"

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
  EXPECT_FALSE(
      llvm::sys::fs::createTemporaryFile("twill-pairs", "jsonl", path));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << contents;
  return std::string(path);
}

// A row holds prompt + chosen in its first seq_len positions (segment 0)
// and prompt + rejected in the second (segment 1), each from position 0;
// a position predicting a completion token is labelled, the prompt's and
// the padding's are not; a sequence past seq_len keeps its start (TRL's
// max_length).
TEST(PreferenceRows, ChosenAndRejectedSideBySide) {
  std::vector<PreferencePair> pairs = {{{1, 7}, {5, 6, 2}, {9, 2}, 1},
                                       {{1, 7, 8}, {4, 4, 4, 2}, {3, 2}, 2}};
  std::vector<Row> rows = pairRows(pairs, 5);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_THAT(rows[0].tokens, ElementsAre(1, 7, 5, 6, 2, 1, 7, 9, 2, 0));
  EXPECT_THAT(rows[0].labels,
              ElementsAre(-100, 5, 6, 2, -100, -100, 9, 2, -100, -100));
  EXPECT_THAT(rows[0].positions, ElementsAre(0, 1, 2, 3, 4, 0, 1, 2, 3, 4));
  EXPECT_THAT(rows[0].segments, ElementsAre(0, 0, 0, 0, 0, 1, 1, 1, 1, 1));
  // The second's chosen (7 tokens) cut to 5: its last two tokens dropped.
  EXPECT_THAT(rows[1].tokens, ElementsAre(1, 7, 8, 4, 4, 1, 7, 8, 3, 2));
  EXPECT_THAT(rows[1].labels,
              ElementsAre(-100, -100, 4, 4, -100, -100, -100, 3, 2, -100));
}

TEST(PreferenceRows, ReadsTokenizedPairsAndLeavesTextAlone) {
  std::string tokenized = writeTemp(
      "{\"prompt_ids\": [1, 7], \"chosen_ids\": [5, 2], \"rejected_ids\": "
      "[9, 2]}\n\n{\"prompt_ids\": [], \"chosen_ids\": [4], "
      "\"rejected_ids\": [3]}\n");
  auto pairs = readTokenizedPairs(tokenized);
  ASSERT_TRUE(bool(pairs)) << llvm::toString(pairs.takeError());
  ASSERT_TRUE(pairs->has_value());
  ASSERT_EQ((*pairs)->size(), 2u);
  EXPECT_THAT((**pairs)[0].chosen, ElementsAre(5, 2));
  EXPECT_EQ((**pairs)[1].line, 3);
  EXPECT_TRUE((**pairs)[1].prompt.empty());

  std::string text = writeTemp(
      "{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n");
  auto none = readTokenizedPairs(text);
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  EXPECT_FALSE(none->has_value());

  for (auto [contents, message] :
       {std::pair("{\"prompt_ids\": [1], \"chosen_ids\": [2]}\n",
                  ":1: no 'rejected_ids' array"),
        std::pair("{\"prompt_ids\": [1], \"chosen_ids\": [2], "
                  "\"rejected_ids\": [-4]}\n",
                  ":1: 'rejected_ids' must hold only token ids"),
        std::pair("{\"prompt_ids\": [1], \"chosen_ids\": [2], "
                  "\"rejected_ids\": [3]}\n{\"prompt_ids\": [1], "
                  "\"chosen_ids\": [], \"rejected_ids\": [3]}\n",
                  ":2: a tokenized pair needs a token in each completion")}) {
    auto refused = readTokenizedPairs(writeTemp(contents));
    ASSERT_FALSE(bool(refused)) << contents;
    EXPECT_THAT(llvm::toString(refused.takeError()), HasSubstr(message));
  }
}

} // namespace
