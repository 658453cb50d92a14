//===- TokenizedDatasetTest.cpp - JSONL reading, packing, DPO's rows ------===//

#include "runtime/data/TokenizedDataset.h"
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
  // Padding is no example's token.
  EXPECT_THAT(first.attentionMask, ElementsAre(1, 1, 1, 1, 1, 1, 1, 0));
  EXPECT_THAT(packed.rows[1].attentionMask,
              ElementsAre(1, 1, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(paddingRow(3).attentionMask, ElementsAre(0, 0, 0));
  EXPECT_THAT(packed.rows[1].tokens, ElementsAre(8, 9, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(packed.rows[1].labels,
              ElementsAre(9, -100, -100, -100, -100, -100, -100, -100));
  EXPECT_EQ(packed.truncatedExamples, 0);
  EXPECT_EQ(packed.labelsKept, 6);
  EXPECT_EQ(packed.labelsCut, 0);
  EXPECT_EQ(packed.longestExample, 4);
  EXPECT_EQ(packed.unlabelledExamples, 0);
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
  // The cut token's label with it; the one-token example has no next token.
  EXPECT_EQ(packed.labelsKept, 3);
  EXPECT_EQ(packed.labelsCut, 1);
  EXPECT_EQ(packed.longestExample, 5);
  EXPECT_EQ(packed.unlabelledExamples, 1);
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
  EXPECT_THAT(rows[0].attentionMask, ElementsAre(1, 1, 1, 1, 1, 1, 1, 1, 1, 0));
  // The second's chosen (7 tokens) cut to 5: its last two tokens dropped.
  EXPECT_THAT(rows[1].tokens, ElementsAre(1, 7, 8, 4, 4, 1, 7, 8, 3, 2));
  EXPECT_THAT(rows[1].labels,
              ElementsAre(-100, -100, 4, 4, -100, -100, -100, 3, 2, -100));
}

TEST(PreferenceRows, IdsOutsideTheVocabularyAreRefusedNamingTheLine) {
  std::vector<PreferencePair> pairs = {{{1, 7}, {5, 2}, {9, 2}, 4},
                                       {{1, 7}, {5, 2}, {9, 97}, 9}};
  EXPECT_FALSE(checkPairVocabulary(pairs, "pairs.jsonl", 98));
  EXPECT_THAT(llvm::toString(checkPairVocabulary(pairs, "pairs.jsonl", 97)),
              HasSubstr("pairs.jsonl:9: rejected token id 97 at position 1 "
                        "is outside the model's vocabulary [0, 97)"));
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
