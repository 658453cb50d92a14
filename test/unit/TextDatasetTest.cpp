//===- TextDatasetTest.cpp - alpaca and chat examples, sampling -----------===//
//
// With a byte-level tokenizer (id = byte, specials from 256) every token of
// an example can be written out by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/data/Sampler.h"
#include "runtime/data/TextDataset.h"
#include "runtime/executable/Layout.h"

#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <set>

using namespace twill;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

namespace {

constexpr int32_t kBegin = 256, kEnd = 257, kHeader = 262, kHeaderEnd = 263,
                  kEot = 265;

std::string temporaryFile(llvm::StringRef suffix, llvm::StringRef contents) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("twill-data", suffix, path));
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  os << contents;
  return std::string(path);
}

/// Every byte is a token, its id the byte.
const Tokenizer &bytes() {
  static std::unique_ptr<Tokenizer> tokenizer = [] {
    std::string model;
    for (int byte = 0; byte < 256; ++byte)
      model += llvm::encodeBase64(std::string(1, char(byte))) + " " +
               std::to_string(byte) + "\n";
    auto loaded = Tokenizer::loadTiktoken(temporaryFile("model", model));
    EXPECT_TRUE(bool(loaded));
    return std::move(*loaded);
  }();
  return *tokenizer;
}

/// Llama 3's framing with the byte tokenizer.
const ChatFormat &llama3() {
  static ChatFormat format = llvm::cantFail(ChatFormat::llama3(bytes(), "b"));
  return format;
}

std::vector<int32_t> ids(llvm::StringRef text) {
  return std::vector<int32_t>(text.bytes_begin(), text.bytes_end());
}

/// The header of `role`'s message.
std::vector<int32_t> header(llvm::StringRef role) {
  std::vector<int32_t> result = {kHeader};
  for (int32_t id : ids(role))
    result.push_back(id);
  result.push_back(kHeaderEnd);
  result.push_back('\n');
  result.push_back('\n');
  return result;
}

TEST(TextDataset, AConversationIsTorchtunesLlama3Format) {
  ChatMessage messages[] = {{"user", "  Hi \n"}, {"assistant", "Yo"}};
  bool trained[] = {false, true};
  llvm::Expected<Example> example =
      tokenizeConversation(bytes(), messages, trained);
  ASSERT_TRUE(bool(example)) << llvm::toString(example.takeError());
  std::vector<int32_t> tokens = {kBegin}, labels = {kIgnoreLabel};
  auto add = [&](std::vector<int32_t> part, bool train) {
    for (int32_t id : part) {
      tokens.push_back(id);
      labels.push_back(train ? id : kIgnoreLabel);
    }
  };
  add(header("user"), false);
  add(ids("Hi"), false); // stripped
  add({kEot}, false);
  add(header("assistant"), true);
  add(ids("Yo"), true);
  add({kEot}, true);
  add({kEnd}, false);
  EXPECT_THAT(example->inputIds, ElementsAreArray(tokens));
  EXPECT_THAT(example->labels, ElementsAreArray(labels));
}

TEST(TextDataset, AlpacaPromptsWithAndWithoutInput) {
  EXPECT_EQ(alpacaPrompt("Add.", ""),
            "Below is an instruction that describes a task. Write a response "
            "that appropriately completes the request.\n\n### Instruction:\n"
            "Add.\n\n### Response:\n");
  EXPECT_EQ(alpacaPrompt("Add.", "1 2"),
            "Below is an instruction that describes a task, paired with an "
            "input that provides further context. Write a response that "
            "appropriately completes the request.\n\n### Instruction:\nAdd."
            "\n\n### Input:\n1 2\n\n### Response:\n");
}

TEST(TextDataset, TrainOnInputDecidesWhatThePromptTeaches) {
  std::string path = temporaryFile(
      "jsonl", R"({"instruction": "Add.", "input": "1 2", "output": "3"})"
               "\n");
  for (bool trainOnInput : {false, true}) {
    auto examples = readAlpacaJsonl(path, llama3(), trainOnInput);
    ASSERT_TRUE(bool(examples)) << llvm::toString(examples.takeError());
    const Example &example = examples->front();
    size_t trained = 0;
    for (int32_t label : example.labels)
      trained += label != kIgnoreLabel;
    // The assistant message: header (12), "3", eot.
    size_t answer = header("assistant").size() + 2;
    if (trainOnInput)
      EXPECT_EQ(trained, example.inputIds.size() - 2); // all but begin, end
    else
      EXPECT_EQ(trained, answer);
  }
}

TEST(TextDataset, BadLinesNameTheFileAndLine) {
  std::string alpaca = temporaryFile("jsonl", "{\"instruction\": \"a\", "
                                              "\"output\": \"b\"}\n"
                                              "{\"instruction\": 3}\n");
  EXPECT_THAT(
      llvm::toString(readAlpacaJsonl(alpaca, llama3(), false).takeError()),
      HasSubstr(alpaca + ":2: 'instruction' must be a string"));
  std::string chat = temporaryFile(
      "jsonl", R"({"messages": [{"role": "user", "content": "a"},)"
               R"( {"role": "system", "content": "b"}]})"
               "\n{oops\n");
  EXPECT_THAT(llvm::toString(readChatJsonl(chat, llama3(), false).takeError()),
              HasSubstr(chat + ":1: message 1: a system message must come "
                               "first"));
  std::string lonely = temporaryFile(
      "jsonl", R"({"messages": [{"role": "assistant", "content": "a"}]})");
  EXPECT_THAT(
      llvm::toString(readChatJsonl(lonely, llama3(), false).takeError()),
      HasSubstr(":1: a conversation needs at least two messages"));
}

TEST(TextDataset, ChatTrainsOnTheAssistantUnlessTrainOnInput) {
  std::string path = temporaryFile(
      "jsonl", R"({"messages": [{"role": "system", "content": "S"},)"
               R"( {"role": "user", "content": "U"},)"
               R"( {"role": "assistant", "content": "A"}]})");
  auto examples = readChatJsonl(path, llama3(), false);
  ASSERT_TRUE(bool(examples)) << llvm::toString(examples.takeError());
  std::string trained;
  for (auto [token, label] :
       llvm::zip_equal(examples->front().inputIds, examples->front().labels))
    if (label != kIgnoreLabel && token < 256)
      trained += char(token);
  EXPECT_EQ(trained, "assistant\n\nA");
}

TEST(TextDataset, ShareGptConversationsAreChats) {
  // The same conversation in OpenAI's form and in ShareGPT's.
  std::string openAi = temporaryFile(
      "jsonl", R"({"messages": [{"role": "system", "content": "S"},)"
               R"( {"role": "user", "content": "U"},)"
               R"( {"role": "assistant", "content": "A"}]})");
  std::string shareGpt = temporaryFile(
      "jsonl", R"({"conversations": [{"from": "system", "value": "S"},)"
               R"( {"from": "human", "value": "U"},)"
               R"( {"from": "gpt", "value": "A"}]})");
  auto expected = readChatJsonl(openAi, llama3(), false);
  auto actual = readChatJsonl(shareGpt, llama3(), false);
  ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());
  ASSERT_TRUE(bool(actual)) << llvm::toString(actual.takeError());
  EXPECT_EQ(actual->front().inputIds, expected->front().inputIds);
  EXPECT_EQ(actual->front().labels, expected->front().labels);
  std::string tool = temporaryFile(
      "jsonl", R"({"conversations": [{"from": "human", "value": "U"},)"
               R"json( {"from": "function_call", "value": "f()"}]})json");
  EXPECT_THAT(llvm::toString(readChatJsonl(tool, llama3(), false).takeError()),
              HasSubstr(":1: ShareGPT's 'from' 'function_call' is not "
                        "supported; allowed: system, human, gpt"));
}

/// A template in Llama 3's style, with the byte tokenizer.
ChatFormat llama3Template(llvm::StringRef source = "{{ bos_token }}"
                                                   "{% for m in messages %}"
                                                   "<|start_header_id|>"
                                                   "{{ m.role }}"
                                                   "<|end_header_id|>\n\n"
                                                   "{{ m.content | trim }}"
                                                   "<|eot_id|>{% endfor %}"
                                                   "{% if add_generation_"
                                                   "prompt %}<|start_header_"
                                                   "id|>assistant<|end_"
                                                   "header_id|>\n\n"
                                                   "{% endif %}") {
  return ChatFormat::withTemplate(
      bytes(), llvm::cantFail(ChatTemplate::parse(source, "t.jinja")),
      {{"bos_token", "<|begin_of_text|>"}}, "t.jinja");
}

/// The bytes of `example`'s trained tokens, a special one as '#'.
std::string trainedText(const Example &example) {
  std::string text;
  for (auto [token, label] : llvm::zip_equal(example.inputIds, example.labels))
    if (label != kIgnoreLabel)
      text += token < 256 ? char(token) : '#';
  return text;
}

TEST(ChatFormat, ATemplateTrainsEachAssistantTurnToItsEnd) {
  ChatMessage messages[] = {{"system", "S"},
                            {"user", " U "},
                            {"assistant", " A "},
                            {"user", "V"},
                            {"assistant", "B"}};
  bool trained[] = {false, false, true, false, true};
  llvm::Expected<Example> example =
      llama3Template().tokenize(messages, trained);
  ASSERT_TRUE(bool(example)) << llvm::toString(example.takeError());
  // The template's text, every byte a token, the specials theirs.
  std::vector<int32_t> tokens = {kBegin};
  for (const ChatMessage &message : messages) {
    for (int32_t id : header(message.role))
      tokens.push_back(id);
    for (int32_t id : ids(llvm::StringRef(message.content).trim()))
      tokens.push_back(id);
    tokens.push_back(kEot);
  }
  EXPECT_THAT(example->inputIds, ElementsAreArray(tokens));
  // Each assistant turn from the end of the generation prompt: its content
  // and its end of turn.
  EXPECT_EQ(trainedText(*example), "A#B#");
  bool everything[] = {true, true, true, true, true};
  llvm::Expected<Example> all = llama3Template().tokenize(messages, everything);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  EXPECT_EQ(all->labels, all->inputIds);
}

TEST(ChatFormat, TurnsThatCannotBeToldApartAreRefused) {
  ChatMessage messages[] = {{"user", "U"}, {"assistant", "A"}};
  bool trained[] = {false, true};
  // The count of messages first: the messages before the answer do not
  // start the whole text.
  EXPECT_THAT(
      llvm::toString(llama3Template("{{ messages | length }}"
                                    "{% for m in messages %}{{ m.content }}"
                                    "{% endfor %}")
                         .tokenize(messages, trained)
                         .takeError()),
      HasSubstr("message 1: the template writes the messages before it, "
                "with the generation prompt, other than as the start of the "
                "whole conversation"));
  // Without special tokens, a turn is the text written for it where the
  // messages up to it start the whole text; where they do not (the count
  // at the end differs), nothing ends it.
  ChatFormat counting = llama3Template(
      "{% for m in messages %}{{ m.content }}{% endfor %}"
      "{% if not add_generation_prompt %}{{ messages | length }}{% endif %}");
  llvm::Expected<Example> plain = counting.tokenize(messages, trained);
  ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
  EXPECT_EQ(trainedText(*plain), "A2");
  ChatMessage three[] = {{"user", "U"}, {"assistant", "A"}, {"user", "V"}};
  bool answer[] = {false, true, false};
  EXPECT_THAT(llvm::toString(counting.tokenize(three, answer).takeError()),
              HasSubstr("message 1: the template writes no special token "
                        "after it to end its turn"));
  // A template that raises says its message.
  EXPECT_THAT(
      llvm::toString(llama3Template("{{ raise_exception('no answers') }}")
                         .tokenize(messages, trained)
                         .takeError()),
      HasSubstr("no answers"));
}

TEST(ChatFormat, ASpecialTokenInsideATurnDoesNotEndIt) {
  // Llama 3.1's tool call: <|python_tag|> opens it, <|eom_id|> ends it.
  ChatFormat format = llama3Template(
      "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}"
      "<|end_header_id|>\n\n{% if m.tool_calls %}<|python_tag|>"
      "{{ m.tool_calls[0].name }}<|eom_id|>{% else %}{{ m.content }}"
      "<|eot_id|>{% endif %}{% endfor %}{% if add_generation_prompt %}"
      "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}");
  ChatMessage messages[] = {
      {"user", "U"},
      {"assistant", "",
       R"({"role": "assistant", "tool_calls": [{"name": "f"}]})"},
      {"ipython", "R"},
      {"assistant", "A"}};
  bool trained[] = {false, true, false, true};
  llvm::Expected<Example> example = format.tokenize(messages, trained);
  ASSERT_TRUE(bool(example)) << llvm::toString(example.takeError());
  EXPECT_EQ(trainedText(*example), "#f#A#");
}

TEST(ChatFormat, ATurnEdgeInsideATokenIsRefused) {
  // Bytes, then "Ax" as one token: the generation prompt's "A" and the
  // answer's "x" make one token, which has no one label.
  std::string model;
  for (int byte = 0; byte < 256; ++byte)
    model += llvm::encodeBase64(std::string(1, char(byte))) + " " +
             std::to_string(byte) + "\n";
  model += llvm::encodeBase64(std::string("Ax")) + " 256\n";
  auto merging = Tokenizer::loadTiktoken(temporaryFile("model", model));
  ASSERT_TRUE(bool(merging)) << llvm::toString(merging.takeError());
  ChatFormat format = ChatFormat::withTemplate(
      **merging,
      llvm::cantFail(ChatTemplate::parse(
          "{% for m in messages %}{% if m.role == 'assistant' %}A{% endif %}"
          "{{ m.content }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}A{% endif %}",
          "x.jinja")),
      {}, "x.jinja");
  ChatMessage messages[] = {{"user", "U"}, {"assistant", "x"}};
  bool trained[] = {false, true};
  EXPECT_THAT(llvm::toString(format.tokenize(messages, trained).takeError()),
              HasSubstr("a trained turn starts or ends inside a token"));
  bool everything[] = {true, true};
  llvm::Expected<Example> all = format.tokenize(messages, everything);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  int32_t eot = (*merging)->specialId("<|eot_id|>");
  EXPECT_THAT(all->inputIds, ElementsAreArray({int32_t('U'), eot, 256, eot}));
}

TEST(ChatFormat, ATemplateReadsEachMessageAndTheToolsAsWritten) {
  // An answer of tool calls without content, its fields and the line's
  // tools as the file writes them, keys in their order.
  std::string path = temporaryFile(
      "jsonl", R"({"tools": [{"b": 1, "a": 2}], "messages": [)"
               R"({"role": "user", "content": "U"}, {"role": "assistant",)"
               R"( "content": null, "tool_calls": [{"name": "f"}]}]})"
               "\n");
  ChatFormat format = llama3Template(
      "{{ tools | tojson }}{% for m in messages %}{{ m.role }}"
      "{% if m.tool_calls %}{{ m.tool_calls[0].name }}{% endif %}"
      "<|eot_id|>{% endfor %}");
  auto examples = readChatJsonl(path, format, false);
  ASSERT_TRUE(bool(examples)) << llvm::toString(examples.takeError());
  std::string text;
  for (int32_t token : examples->front().inputIds)
    text += token < 256 ? char(token) : '#';
  EXPECT_EQ(text, R"([{"b": 1, "a": 2}]user#assistantf#)");
  EXPECT_EQ(trainedText(examples->front()), "assistantf#");
  // A key written with an escape is refused, not read in part.
  std::string escaped = temporaryFile(
      "jsonl", R"({"m\u0065ssages": [{"role": "user", "content": "U"}]})");
  EXPECT_THAT(llvm::toString(readChatJsonl(escaped, format, false).takeError()),
              HasSubstr(":1: 'messages' or 'tools' cannot be read as "
                        "written"));
  // Llama 3's framing writes no tools: they are not dropped unsaid.
  EXPECT_THAT(llvm::toString(readChatJsonl(path, llama3(), false).takeError()),
              HasSubstr(":1: 'tools' are written by the model's chat "
                        "template, and this model has none"));
}

TEST(ChatFormat, RolesNoTemplateRendersAreRefusedNamed) {
  ChatFormat format = llama3Template();
  // ShareGPT's names inside OpenAI's messages: the row would train on
  // nothing, as the template renders an unknown role as any other.
  std::string shareGptNames = temporaryFile(
      "jsonl", R"({"messages": [{"role": "user", "content": "U"},)"
               R"( {"role": "assistant", "content": "A"}]})"
               "\n"
               R"({"messages": [{"role": "human", "content": "U"},)"
               R"( {"role": "bot", "content": "A"}]})"
               "\n");
  EXPECT_THAT(
      llvm::toString(readChatJsonl(shareGptNames, format, false).takeError()),
      HasSubstr(":2: message 0: role 'human' is none of OpenAI's roles "
                "(system, developer, user, assistant, tool) nor one the chat "
                "template names, so the message would be rendered as nothing "
                "the model knows: did you mean 'user'?"));
  // A role the template names is its own (GLM's observation).
  std::string observation = temporaryFile(
      "jsonl", R"({"messages": [{"role": "user", "content": "U"},)"
               R"( {"role": "observation", "content": "O"},)"
               R"( {"role": "assistant", "content": "A"}]})");
  EXPECT_THAT(
      llvm::toString(readChatJsonl(observation, format, false).takeError()),
      HasSubstr("message 1: role 'observation' is none"));
  ChatFormat glm = llama3Template(
      "{% for m in messages %}{% if m.role == 'observation' %}<|eot_id|>"
      "{% endif %}{{ m.role }}{{ m.content }}<|eot_id|>{% endfor %}");
  auto read = readChatJsonl(observation, glm, false);
  EXPECT_TRUE(bool(read)) << llvm::toString(read.takeError());
}

TEST(ChatFormat, AMessageWithoutContentIsRefusedNamingItsKeys) {
  std::string path =
      temporaryFile("jsonl", R"({"messages": [{"role": "user", "text": "U"},)"
                             R"( {"role": "assistant", "content": "A"}]})");
  std::string expected = ":1: message 0 has no 'content' nor 'tool_calls' "
                         "(its keys: 'role', 'text')";
  EXPECT_THAT(
      llvm::toString(readChatJsonl(path, llama3Template(), false).takeError()),
      HasSubstr(expected));
  EXPECT_THAT(llvm::toString(readChatJsonl(path, llama3(), false).takeError()),
              HasSubstr(expected));
}

TEST(Packing, BoundariesAndPositionsOfAHandMadeExample) {
  // Two examples of 3 and 2 tokens in one row of 6: each starts at position
  // 0 in its own segment; label i is the example's label i + 1; the last
  // position of each example and the padding teach nothing.
  std::vector<Example> examples = {{{10, 11, 12}, {-100, 11, 12}},
                                   {{20, 21}, {20, 21}}};
  PackResult packed = packExamples(examples, 6, /*packed=*/true);
  ASSERT_EQ(packed.rows.size(), 1u);
  const Row &row = packed.rows.front();
  EXPECT_THAT(row.tokens, ElementsAreArray({10, 11, 12, 20, 21, 0}));
  EXPECT_THAT(row.labels,
              ElementsAreArray({11, 12, -100, 21, -100, -100}));
  EXPECT_THAT(row.positions, ElementsAreArray({0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(row.segments[0], row.segments[2]);
  EXPECT_NE(row.segments[2], row.segments[3]);
  EXPECT_EQ(row.segments[3], row.segments[4]);
}

TEST(Sampler, EachEpochIsAPermutationOfItsOwn) {
  std::vector<int64_t> first = epochOrder(100, 7, 0, true);
  std::vector<int64_t> again = epochOrder(100, 7, 0, true);
  std::vector<int64_t> second = epochOrder(100, 7, 1, true);
  EXPECT_EQ(first, again);
  EXPECT_NE(first, second);
  EXPECT_EQ(std::set<int64_t>(first.begin(), first.end()).size(), 100u);
  std::vector<int64_t> inOrder = epochOrder(5, 7, 3, false);
  EXPECT_THAT(inOrder, ElementsAreArray({0, 1, 2, 3, 4}));
}

TEST(Sampler, DpRanksTogetherSeeEveryRowOncePerEpoch) {
  // 10 rows, micro-batches of 4 (the last one padded), split over dp as the
  // batch inputs' placement splits them; tp ranks see their dp group's rows.
  const int64_t rows = 10, batch = 4;
  for (int dp : {1, 2, 4}) {
    Mesh mesh;
    mesh.add_axes("dp");
    mesh.add_axes("tp");
    mesh.add_shape(dp);
    mesh.add_shape(2);
    Buffer tokens;
    tokens.add_global_shape(batch);
    tokens.add_split_dims(0);
    tokens.add_split_dims(-1);
    tokens.add_shape((batch + dp - 1) / dp);
    std::vector<int64_t> order = epochOrder(rows, 3, 1, true);
    std::multiset<int64_t> seen;
    for (int64_t start = 0; start < rows; start += batch)
      for (int rank = 0; rank < dp; ++rank) {
        std::set<int64_t> byTp[2];
        for (int tp = 0; tp < 2; ++tp) {
          auto block = blockOf(tokens, mesh, {rank, tp});
          ASSERT_TRUE(bool(block)) << llvm::toString(block.takeError());
          for (int64_t i = 0; i < block->extent[0]; ++i) {
            int64_t position = start + block->offset[0] + i;
            if (position < rows)
              byTp[tp].insert(order[position]);
          }
        }
        EXPECT_EQ(byTp[0], byTp[1]) << "dp " << dp;
        seen.insert(byTp[0].begin(), byTp[0].end());
      }
    EXPECT_EQ(seen.size(), size_t(rows)) << "dp " << dp;
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(),
              size_t(rows))
        << "dp " << dp;
  }
}

} // namespace
