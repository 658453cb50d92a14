//===- JsonTest.cpp - the source texts of JSON members and elements -------===//

#include "support/Json.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::ElementsAre;

namespace {

TEST(JsonSource, AMembersTextIsAsWritten) {
  llvm::StringRef line =
      R"( { "tools" : [1, 2] ,"messages":[ {"z": 1, "a": "}]\"{"} ,)"
      R"( [ ] , "x,y", -1.5e3 , true,null ], "n": 7 } )";
  // Keys in their order, strings holding brackets, quotes and commas.
  EXPECT_EQ(jsonMemberText(line, "tools"), "[1, 2]");
  EXPECT_EQ(jsonMemberText(line, "n"), "7");
  EXPECT_EQ(jsonMemberText(line, "absent"), "");
  // A key given twice: the last, as the parser keeps it.
  llvm::StringRef twice = R"({"k": [1], "k": [2, 3]})";
  EXPECT_EQ(jsonMemberText(twice, "k"), "[2, 3]");
  llvm::Expected<llvm::json::Value> parsed = parseJson(twice, "twice");
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  EXPECT_EQ(parsed->getAsObject()->getArray("k")->size(), 2u);
  EXPECT_THAT(jsonElementTexts(jsonMemberText(line, "messages")),
              ElementsAre(R"({"z": 1, "a": "}]\"{"})", "[ ]", "\"x,y\"",
                          "-1.5e3", "true", "null"));
  EXPECT_THAT(jsonElementTexts("[]"), ElementsAre());
  EXPECT_THAT(jsonElementTexts(""), ElementsAre());
}

TEST(JsonSource, EveryElementOfARealLineMatchesItsParse) {
  llvm::StringRef line =
      R"({"messages": [{"role": "user", "content": "a \"b\" [c]"},)"
      R"( {"role": "assistant", "tool_calls": [{"function": {"name": "f",)"
      R"( "arguments": {"y": 2, "x": [1, {"k": "}"}]}}}]}]})";
  llvm::Expected<llvm::json::Value> whole = parseJson(line, "line");
  ASSERT_TRUE(bool(whole)) << llvm::toString(whole.takeError());
  const llvm::json::Array *messages =
      whole->getAsObject()->getArray("messages");
  std::vector<llvm::StringRef> texts =
      jsonElementTexts(jsonMemberText(line, "messages"));
  ASSERT_EQ(texts.size(), messages->size());
  for (size_t i = 0; i < texts.size(); ++i) {
    llvm::Expected<llvm::json::Value> element = parseJson(texts[i], "element");
    ASSERT_TRUE(bool(element)) << llvm::toString(element.takeError());
    EXPECT_EQ(*element, (*messages)[i]);
  }
}

} // namespace
