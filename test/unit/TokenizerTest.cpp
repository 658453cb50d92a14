//===- TokenizerTest.cpp - loading a tokenizer.model ----------------------===//
//
// Encoding itself is checked against tiktoken (test/oracle); these are the
// file errors.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Tokenizer.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::HasSubstr;

namespace {

std::string writeModel(llvm::StringRef contents) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("twill-tok", "model", path));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << contents;
  return std::string(path);
}

std::string errorOf(llvm::StringRef contents) {
  std::string path = writeModel(contents);
  auto tokenizer = Tokenizer::loadTiktoken(path);
  EXPECT_FALSE(bool(tokenizer));
  return tokenizer ? "" : llvm::toString(tokenizer.takeError());
}

TEST(Tokenizer, TinyVocabularyEncodesAndDecodes) {
  // "a", "b", "ab" and the special tokens after them.
  std::string path = writeModel("YQ== 0\nYg== 1\nYWI= 2\n");
  auto tokenizer = Tokenizer::loadTiktoken(path);
  ASSERT_TRUE(bool(tokenizer)) << llvm::toString(tokenizer.takeError());
  EXPECT_EQ((*tokenizer)->vocabSize(), 3 + 256);
  EXPECT_EQ((*tokenizer)->specialId("<|begin_of_text|>"), 3);
  EXPECT_EQ((*tokenizer)->specialId("<|eot_id|>"), 12);
  EXPECT_EQ((*tokenizer)->specialId("ab"), -1);
  EXPECT_THAT((*tokenizer)->encode("abab<|eot_id|>", true),
              ::testing::ElementsAre(2, 2, 12));
  auto text = (*tokenizer)->decode({2, 0, 12});
  ASSERT_TRUE(bool(text));
  EXPECT_EQ(*text, "aba<|eot_id|>");
  EXPECT_THAT(llvm::toString((*tokenizer)->decode({999}).takeError()),
              HasSubstr("token id 999 is outside the vocabulary"));
}

TEST(Tokenizer, BadLinesAreNamed) {
  EXPECT_THAT(errorOf("YQ== 0\n!!! 1\n"), HasSubstr(":2: '!!!' is not base64"));
  EXPECT_THAT(errorOf("YQ== 0\nYg== 5\n"),
              HasSubstr(":2: expected rank 1, got '5'"));
  EXPECT_THAT(
      llvm::toString(
          Tokenizer::loadTiktoken("/nonexistent/tokenizer.model").takeError()),
      HasSubstr("/nonexistent/tokenizer.model"));
}

} // namespace
