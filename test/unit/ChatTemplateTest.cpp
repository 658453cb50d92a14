//===- ChatTemplateTest.cpp - chat templates' errors ----------------------===//
//
// Rendering itself is checked against transformers (test/oracle); these are
// the errors, each naming the construct and its line, and the files a
// template is read from.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/template/ChatTemplate.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::HasSubstr;

namespace {

std::string parseError(llvm::StringRef source) {
  llvm::Expected<ChatTemplate> parsed = ChatTemplate::parse(source, "t");
  EXPECT_FALSE(bool(parsed));
  return parsed ? "" : llvm::toString(parsed.takeError());
}

llvm::Expected<std::string> render(llvm::StringRef source,
                                   llvm::StringRef variables) {
  llvm::Expected<ChatTemplate> parsed = ChatTemplate::parse(source, "t");
  if (!parsed)
    return parsed.takeError();
  return parsed->render(variables);
}

std::string renderError(llvm::StringRef source, llvm::StringRef variables) {
  llvm::Expected<std::string> text = render(source, variables);
  EXPECT_FALSE(bool(text));
  return text ? "" : llvm::toString(text.takeError());
}

TEST(ChatTemplate, UnbuiltConstructsAreRefusedWithTheirLine) {
  EXPECT_THAT(parseError("a\n{% macro m() %}x{% endmacro %}"),
              HasSubstr("t:2: unsupported construct 'macro'"));
  EXPECT_THAT(parseError("{{ x | wordwrap }}"),
              HasSubstr("t:1: unsupported filter 'wordwrap'"));
  EXPECT_THAT(parseError("\n\n{% if x is lower %}{% endif %}"),
              HasSubstr("t:3: unsupported test 'lower'"));
  EXPECT_THAT(parseError("{% set x %}y{% endset %}"),
              HasSubstr("unsupported construct: a set block"));
  EXPECT_THAT(parseError("{% for x in y recursive %}{% endfor %}"),
              HasSubstr("unsupported construct 'recursive' loops"));
}

TEST(ChatTemplate, MalformedTemplatesAreNamed) {
  EXPECT_THAT(parseError("{{ x "), HasSubstr("t:1: a tag is not closed"));
  EXPECT_THAT(parseError("{% for m in messages %}x"),
              HasSubstr("the template ends inside a block: expected "
                        "'endfor'"));
  EXPECT_THAT(parseError("x\n{% endif %}"),
              HasSubstr("t:2: 'endif' without the block it ends"));
  EXPECT_THAT(parseError("{{ 'open }}"), HasSubstr("a tag is not closed"));
  EXPECT_THAT(parseError("{{ a ! b }}"), HasSubstr("unexpected character"));
}

TEST(ChatTemplate, ATemplateThatRaisesIsAnError) {
  EXPECT_THAT(renderError("line one\n{{ raise_exception('roles must "
                          "alternate') }}",
                          "{}"),
              HasSubstr("line 2: the template raised an exception: roles "
                        "must alternate"));
  EXPECT_THAT(renderError("{{ messages.x.y }}", R"({"messages": {}})"),
              HasSubstr("an undefined value has no attribute 'y'"));
  EXPECT_THAT(renderError("{% set x.y = 1 %}", R"({"x": 1})"),
              HasSubstr("'x' is not a namespace"));
  EXPECT_THAT(renderError("{{ 1 // 0 }}", "{}"), HasSubstr("division by zero"));
  // As Python refuses them (the fuzzer's: an empty separator never ended).
  EXPECT_THAT(renderError("{{ 'abc'.split('') }}", "{}"),
              HasSubstr("split(): empty separator"));
  EXPECT_THAT(renderError("{{ 'abc'.split(x) }}", "{}"),
              HasSubstr("split() takes a string or none as its separator"));
  EXPECT_THAT(renderError("{{ x }}", "[1]"),
              HasSubstr("the variables must be a JSON object"));
  EXPECT_THAT(renderError("{{ x }}", R"({"x": )"),
              HasSubstr("expected a value"));
}

TEST(ChatTemplate, VariablesKeepTheirKeysInOrder) {
  llvm::Expected<std::string> text =
      render("{{ m | tojson }} {% for k in m %}{{ k }}{% endfor %}",
             R"({"m": {"z": 1, "a": "\u00e9\ud83d\ude80"}})");
  ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
  EXPECT_EQ(*text, "{\"z\": 1, \"a\": \"é🚀\"} za");
}

TEST(ChatTemplate, LoadsTokenizerConfigsAndJinjaFiles) {
  llvm::SmallString<128> config, jinja;
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("twill-template", "json", config));
  ASSERT_FALSE(
      llvm::sys::fs::createTemporaryFile("twill-template", "jinja", jinja));
  {
    std::error_code error;
    llvm::raw_fd_ostream(config, error)
        << R"({"chat_template": [{"name": "tool_use", "template": "T"},)"
           R"( {"name": "default", "template": "D{{ bos_token }}"}]})";
    llvm::raw_fd_ostream(jinja, error) << "J{{ eos_token }}\n";
  }
  llvm::Expected<ChatTemplate> named = ChatTemplate::load(config);
  ASSERT_TRUE(bool(named)) << llvm::toString(named.takeError());
  EXPECT_EQ(llvm::cantFail(named->render(R"({"bos_token": "<s>"})")), "D<s>");
  llvm::Expected<ChatTemplate> file = ChatTemplate::load(jinja);
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  EXPECT_EQ(llvm::cantFail(file->render(R"({"eos_token": "</s>"})")), "J</s>");
}

} // namespace
