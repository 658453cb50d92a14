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

// Inheritance, includes, imports and call blocks are refused by name
// (macros, with, filter and set blocks and recursive loops are built: the
// chat template oracle renders them against transformers).
TEST(ChatTemplate, UnbuiltConstructsAreRefusedWithTheirLine) {
  EXPECT_THAT(parseError("a\n{% extends 'base.jinja' %}"),
              HasSubstr("t:2: unsupported construct 'extends'"));
  EXPECT_THAT(parseError("{% block body %}x{% endblock %}"),
              HasSubstr("t:1: unsupported construct 'block'"));
  EXPECT_THAT(parseError("{% include 'tools.jinja' %}"),
              HasSubstr("unsupported construct 'include'"));
  EXPECT_THAT(parseError("{% call m() %}x{% endcall %}"),
              HasSubstr("unsupported construct 'call'"));
  EXPECT_THAT(parseError("{{ x | wordwrap }}"),
              HasSubstr("t:1: unsupported filter 'wordwrap'"));
  EXPECT_THAT(parseError("\n\n{% if x is lower %}{% endif %}"),
              HasSubstr("t:3: unsupported test 'lower'"));
  EXPECT_THAT(parseError("{% set x | upper %}y{% endset %}"),
              HasSubstr("a set block's filter"));
  EXPECT_THAT(parseError("{% filter nosuch %}y{% endfilter %}"),
              HasSubstr("unsupported filter 'nosuch'"));
  EXPECT_THAT(parseError("{% macro m() %}x{% endwith %}"),
              HasSubstr("t:1: 'endwith' without the block it ends"));
  EXPECT_THAT(parseError("{% macro m() %}x"),
              HasSubstr("the template ends inside a block: expected "
                        "'endmacro'"));
}

// A macro is called as Jinja calls one; calls that never end are bounded.
TEST(ChatTemplate, MacroCallsAreCheckedAndBounded) {
  EXPECT_THAT(
      renderError("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", "{}"),
      HasSubstr("macro 'm' takes not more than 1 argument(s)"));
  EXPECT_THAT(
      renderError("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=1) }}", "{}"),
      HasSubstr("macro 'm' takes no keyword argument 'b'"));
  EXPECT_THAT(
      renderError("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{}"),
      HasSubstr("calls nested deeper than 32"));
  EXPECT_THAT(renderError("{% for x in [1] recursive %}{{ loop([1]) }}"
                          "{% endfor %}",
                          "{}"),
              HasSubstr("calls nested deeper than 32"));
  EXPECT_THAT(
      renderError("{% for x in [1] %}{{ loop([1]) }}{% endfor %}", "{}"),
      HasSubstr("is not callable"));
  // A macro sees the template's names and its own, not its caller's.
  llvm::Expected<std::string> text =
      render("{% set g = 'G' %}{% macro m() %}{{ g }}{{ x }}{% endmacro %}"
             "{% for x in [1] %}{{ m() }}{% endfor %}",
             "{}");
  ASSERT_TRUE(bool(text)) << llvm::toString(text.takeError());
  EXPECT_EQ(*text, "G");
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

std::string rendered(llvm::StringRef source) {
  llvm::Expected<std::string> text = render(source, "{}");
  EXPECT_TRUE(bool(text)) << llvm::toString(text.takeError());
  return text ? *text : "";
}

// A template comes with a downloaded model, so it is untrusted: what it
// makes is bounded, and sized before it is made where it can be, so that
// none exhausts memory or time, crashes, or wraps an integer around.
const char *const kTooBig = "more than 16 MiB";

TEST(ChatTemplateBounds, ListsAreBounded) {
  EXPECT_THAT(renderError("{% set ns = namespace(l=[0]) %}{% for i in "
                          "range(40) %}{% set ns.l = ns.l + ns.l %}"
                          "{% endfor %}",
                          "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{% set x = [1] * 10**18 %}", "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{% set x = ('a' * 1000000)|list %}", "{}"),
              HasSubstr(kTooBig));
  // A method holds what it is bound to.
  EXPECT_THAT(renderError("{% set ns = namespace(l=[]) %}{% for i in "
                          "range(1000) %}{% set ns.l = ns.l + [('x' * "
                          "1000000).upper] %}{% endfor %}",
                          "{}"),
              HasSubstr(kTooBig));
  // As transformers' sandbox bounds range, before any item is made.
  EXPECT_THAT(renderError("{% set x = range(10**9) %}", "{}"),
              HasSubstr("Range too big. The sandbox blocks ranges larger "
                        "than MAX_RANGE (100000)."));
  EXPECT_EQ(rendered("{{ range(100000)|length }} {{ [1, 2] * 2 }} "
                     "{{ 2 * [3] }} {{ [] * 10**18 }}"),
            "100000 [1, 2, 1, 2] [3, 3] []");
}

TEST(ChatTemplateBounds, ConcatenatedStringsAreBounded) {
  for (const char *op : {"~", "+"})
    EXPECT_THAT(renderError(std::string("{% set ns = namespace(s='ab') %}"
                                        "{% for i in range(64) %}"
                                        "{% set ns.s = ns.s ") +
                                op + " ns.s %}{% endfor %}",
                            "{}"),
                HasSubstr(kTooBig));
  // The rendered text, a join and a replace grow as far as any string.
  EXPECT_THAT(renderError("{% for i in range(20000) %}{{ 'x' * 1000 }}"
                          "{% endfor %}",
                          "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{% set x = range(100000)|join('x' * 1000) %}", "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(
      renderError("{% set x = 'abc'.join(['x' * 10000000] * 2) %}", "{}"),
      HasSubstr(kTooBig));
  EXPECT_THAT(
      renderError("{% set x = 'abc'.replace('', 'x' * 10000000) %}", "{}"),
      HasSubstr(kTooBig));
  // What else would widen text is refused already: no center, ljust,
  // indent or format filter, no % formatting.
  EXPECT_THAT(parseError("{{ 'x'|center(10**9) }}"),
              HasSubstr("unsupported filter 'center'"));
  EXPECT_THAT(renderError("{{ '%1000000000d' % 5 }}", "{}"),
              HasSubstr("'%' of '%1000000000d' and '5'"));
}

TEST(ChatTemplateBounds, TojsonIsBounded) {
  EXPECT_THAT(renderError("{{ [[[1]]]|tojson(indent=10**15) }}", "{}"),
              HasSubstr(kTooBig));
  // Lists nested in a loop are bounded as they are made: printing, tojson,
  // == and freeing them recurse.
  EXPECT_THAT(renderError("{% set ns = namespace(l=[]) %}{% for i in "
                          "range(100000) %}{% set ns.l = [ns.l] %}"
                          "{% endfor %}{{ ns.l|tojson }}",
                          "{}"),
              HasSubstr("nested deeper than 512 levels"));
  // Python's: a negative indent indents by nothing, a string by itself.
  EXPECT_EQ(rendered("{{ [1, [2]]|tojson(indent=-1) }}"), "[\n1,\n[\n2\n]\n]");
  EXPECT_EQ(rendered("{{ [1]|tojson(indent='--') }}"), "[\n--1\n]");
}

TEST(ChatTemplateBounds, NamespacesThatHoldThemselves) {
  const char *selfHeld = "{% set ns = namespace(x=none) %}{% set ns.x = ns %}"
                         "{% set other = namespace(x=none) %}"
                         "{% set other.x = other %}";
  for (const char *json : {"{{ ns|tojson }}", "{{ [ns]|tojson }}"})
    EXPECT_THAT(renderError(std::string(selfHeld) + json, "{}"),
                HasSubstr("Object of type TemplateNamespace is not JSON "
                          "serializable"));
  // Namespaces are equal only to themselves, as Python's.
  EXPECT_EQ(rendered(std::string(selfHeld) +
                     "{{ ns == other }} {{ [ns.x] == [ns] }}"),
            "False True");
  // A long chain of namespaces is freed without a recursion as deep.
  EXPECT_EQ(rendered("{% set ns = namespace(x=none) %}{% for i in "
                     "range(80000) %}{% set ns.x = namespace(x=ns.x) %}"
                     "{% endfor %}done"),
            "done");
  // What namespaces hold is bounded all together: a loop makes any number.
  EXPECT_THAT(renderError("{% set ns = namespace(l=[]) %}{% for i in "
                          "range(1000) %}{% set ns.l = ns.l + [namespace()] %}"
                          "{% endfor %}{% for n in ns.l %}"
                          "{% set n.x = 'x' * 1000000 %}{% endfor %}",
                          "{}"),
              HasSubstr(kTooBig));
}

TEST(ChatTemplateBounds, SplitsAndIterationAreBoundedAsTheyAreMade) {
  EXPECT_THAT(renderError("{% set x = ('a ' * 4000000).split() %}", "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{% set x = ('a,' * 4000000).split(',') %}", "{}"),
              HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{% for c in 'a' * 4000000 %}{% endfor %}", "{}"),
              HasSubstr(kTooBig));
  EXPECT_EQ(rendered("{{ 'a b  c '.split(none, 1) }} {{ 'a,b,c'.split(',', "
                     "1) }}"),
            "['a', 'b  c '] ['a', 'b,c']");
}

TEST(ChatTemplateBounds, RepetitionAndPowerAreSizedFirst) {
  // (Jinja's ** groups from the left: 1 ** 10**18 is (1 ** 10) ** 18.)
  EXPECT_EQ(rendered("[{{ '' * 10**18 }}] {{ 1 ** (10**18) }} {{ (-1) ** "
                     "(10**18 + 1) }} {{ (-2) ** 63 }}"),
            "[] 1 -1 -9223372036854775808");
  EXPECT_THAT(renderError("{{ 'a' * 10**18 }}", "{}"), HasSubstr(kTooBig));
  EXPECT_THAT(renderError("{{ 10 ** (10**18) }}", "{}"),
              HasSubstr("an integer past 64 bits"));
  EXPECT_THAT(renderError("{{ 2 ** 63 }}", "{}"),
              HasSubstr("an integer past 64 bits"));
  // Past 64 bits is refused, never wrapped around (or undefined).
  EXPECT_THAT(renderError("{{ (-9223372036854775807 - 1)|abs }}", "{}"),
              HasSubstr("an integer past 64 bits"));
  EXPECT_THAT(renderError("{{ (10.0 ** 30)|int }}", "{}"),
              HasSubstr("an integer past 64 bits"));
  EXPECT_EQ(rendered("{{ (-9223372036854775807 - 1) is divisibleby(-1) }} "
                     "{{ [1, 2, 3][1:3:9223372036854775807] }} "
                     "{{ range(9223372036854775806, 9223372036854775807, "
                     "10)|list }}"),
            "True [2] [9223372036854775806]");
}

TEST(ChatTemplateBounds, StrftimeIsNotTruncated) {
  EXPECT_EQ(rendered("{{ strftime_now('%Y' * 200)|length }}"
                     "[{{ strftime_now('') }}]"),
            "800[]");
  EXPECT_THAT(renderError("{{ strftime_now('%Y' * 5000000) }}", "{}"),
              HasSubstr(kTooBig));
}

TEST(ChatTemplateBounds, NonIntegersAreRefusedAsPythonRefusesThem) {
  EXPECT_THAT(renderError("{{ 'ab' * 2.5 }}", "{}"),
              HasSubstr("can't multiply sequence by non-int of type "
                        "'float'"));
  EXPECT_THAT(renderError("{{ [1] * 'b' }}", "{}"),
              HasSubstr("can't multiply sequence by non-int of type 'str'"));
  EXPECT_THAT(renderError("{{ range(3.0) }}", "{}"),
              HasSubstr("'float' object cannot be interpreted as an "
                        "integer"));
  EXPECT_THAT(renderError("{{ range(none) }}", "{}"),
              HasSubstr("'NoneType' object cannot be interpreted as an "
                        "integer"));
  EXPECT_THAT(renderError("{{ 'a,b'.split(',', 1.0) }}", "{}"),
              HasSubstr("'float' object cannot be interpreted as an "
                        "integer"));
  EXPECT_THAT(renderError("{{ [1]|tojson(indent=2.0) }}", "{}"),
              HasSubstr("can't multiply sequence by non-int of type "
                        "'float'"));
  EXPECT_EQ(rendered("{{ 'ab' * true }} [{{ [1, 2][1.0] }}]"), "ab []");
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

// A template file that is not UTF-8 (saved as UTF-16, or in Latin-1) is
// refused naming the file and the byte, as transformers refuses to read it.
TEST(ChatTemplate, TemplatesThatAreNotUtf8AreRefused) {
  for (auto [bytes, offset, utf16] :
       {std::tuple<std::string, int, bool>{std::string("\xff\xfe{\0{\0", 6), 0,
                                           true},
        {"{{ 'caf\xe9' }}", 7, false}}) {
    llvm::SmallString<128> path;
    ASSERT_FALSE(
        llvm::sys::fs::createTemporaryFile("twill-template", "jinja", path));
    {
      std::error_code error;
      llvm::raw_fd_ostream(path, error) << bytes;
    }
    llvm::Expected<ChatTemplate> loaded = ChatTemplate::load(path);
    ASSERT_FALSE(bool(loaded));
    std::string message = llvm::toString(loaded.takeError());
    EXPECT_NE(message.find(path.str().str() + ": is not UTF-8 text (byte " +
                           std::to_string(offset) + " starts"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("UTF-16") != std::string::npos, utf16) << message;
    llvm::sys::fs::remove(path);
  }
}

} // namespace
