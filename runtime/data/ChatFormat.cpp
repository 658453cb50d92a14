//===- ChatFormat.cpp - conversations into tokens and labels --------------===//

#include "runtime/data/ChatFormat.h"

#include "support/Json.h"
#include "support/ReadFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace twill;
namespace json = llvm::json;

/// The most text the prompts before a conversation's trained turns may
/// render, in all.
constexpr size_t kMaxPromptRenderBytes = size_t(1) << 28;

static llvm::Error formatError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

//===----------------------------------------------------------------------===//
// Llama 3's framing
//===----------------------------------------------------------------------===//

llvm::Expected<Example>
twill::tokenizeConversation(const Tokenizer &tokenizer,
                            llvm::ArrayRef<ChatMessage> messages,
                            llvm::ArrayRef<bool> trained) {
  Example example;
  auto append = [&](llvm::ArrayRef<int32_t> ids, bool train) {
    example.inputIds.insert(example.inputIds.end(), ids.begin(), ids.end());
    for (int32_t id : ids)
      example.labels.push_back(train ? id : kIgnoreLabel);
  };
  auto appendText = [&](llvm::StringRef text, bool train) -> llvm::Error {
    llvm::Expected<std::vector<int32_t>> ids = tokenizer.encode(text, false);
    if (!ids)
      return ids.takeError();
    append(*ids, train);
    return llvm::Error::success();
  };
  append({tokenizer.specialId("<|begin_of_text|>")}, false);
  for (auto [message, train] : llvm::zip_equal(messages, trained)) {
    append({tokenizer.specialId("<|start_header_id|>")}, train);
    if (llvm::Error error =
            appendText(llvm::StringRef(message.role).trim(), train))
      return std::move(error);
    append({tokenizer.specialId("<|end_header_id|>")}, train);
    if (llvm::Error error = appendText("\n\n", train))
      return std::move(error);
    if (llvm::Error error =
            appendText(llvm::StringRef(message.content).trim(), train))
      return std::move(error);
    append({tokenizer.specialId("<|eot_id|>")}, train);
  }
  append({tokenizer.specialId("<|end_of_text|>")}, false);
  return example;
}

/// torchtune's checks of a conversation.
static llvm::Error checkConversation(llvm::ArrayRef<ChatMessage> messages) {
  if (messages.size() < 2)
    return formatError("a conversation needs at least two messages");
  for (auto [index, message] : llvm::enumerate(messages)) {
    llvm::StringRef role = message.role;
    if (role != "system" && role != "user" && role != "assistant" &&
        role != "ipython")
      return formatError(llvm::formatv("message {0}: role '{1}' is none of "
                                       "system, user, assistant, ipython",
                                       index, role));
    // Not `cond ? role : ""`: that makes a temporary std::string.
    llvm::StringRef previous =
        index ? llvm::StringRef(messages[index - 1].role) : llvm::StringRef();
    if (role == "system" && index != 0)
      return formatError(llvm::formatv("message {0}: a system message must "
                                       "come first",
                                       index));
    if (role == "user" && previous == "user")
      return formatError(llvm::formatv("messages {0} and {1} are both from "
                                       "the user",
                                       index - 1, index));
    if (role == "assistant" && previous != "user")
      return formatError(llvm::formatv("message {0}: an assistant message "
                                       "must follow a user message",
                                       index));
  }
  return llvm::Error::success();
}

bool ChatFormat::knowsRole(llvm::StringRef role) const {
  // developer: gpt-oss's system; function: OpenAI's tool role before tool.
  static constexpr llvm::StringLiteral common[] = {
      "system", "developer", "user",   "assistant",
      "tool",   "function",  "ipython"};
  return llvm::is_contained(common, role) ||
         (chatTemplate && chatTemplate->quotes(role));
}

llvm::Expected<ChatFormat> ChatFormat::llama3(const Tokenizer &tokenizer,
                                              llvm::StringRef source) {
  for (llvm::StringRef name :
       {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eot_id|>", "<|end_of_text|>"})
    if (tokenizer.specialId(name) < 0)
      return formatError(source + ": has no special token '" + name +
                         "', which alpaca and chat rows are framed with "
                         "where the model has no chat template: give the "
                         "model's (data.chat_template, or a "
                         "checkpoint.base_dir with one), or a Llama 3 "
                         "tokenizer");
  ChatFormat format(tokenizer);
  format.from = "Llama 3's framing (torchtune's: the model has no chat "
                "template)";
  return format;
}

//===----------------------------------------------------------------------===//
// The model's template
//===----------------------------------------------------------------------===//

ChatFormat ChatFormat::withTemplate(
    const Tokenizer &tokenizer, ChatTemplate chatTemplate,
    std::vector<std::pair<std::string, std::string>> specialTokens,
    std::string description) {
  ChatFormat format(tokenizer);
  format.chatTemplate = std::move(chatTemplate);
  format.specialTokens = std::move(specialTokens);
  format.from = std::move(description);
  return format;
}

/// The special tokens' text a tokenizer_config.json gives (each a string,
/// or an added token's object with its "content"), as transformers hands
/// them to the template.
static std::vector<std::pair<std::string, std::string>>
specialTokensOf(const json::Object &config) {
  std::vector<std::pair<std::string, std::string>> tokens;
  for (llvm::StringRef name :
       {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
        "cls_token", "mask_token"}) {
    const json::Value *value = config.get(name);
    const json::Object *added = value ? value->getAsObject() : nullptr;
    std::optional<llvm::StringRef> text = added   ? added->getString("content")
                                          : value ? value->getAsString()
                                                  : std::nullopt;
    if (text)
      tokens.push_back({name.str(), text->str()});
  }
  return tokens;
}

/// Checks the tokens tokenizer_config.json `path` names (its special tokens,
/// and added_tokens_decoder's by id) against `tokenizer`. transformers adds
/// each to its tokenizer (a new id past the vocabulary, or a token of the
/// vocabulary then recognised whole) whatever id is written: a token the
/// tokenizer has not added would encode otherwise than transformers encodes
/// it, and an id other than the tokenizer's is a file contradicting itself.
static llvm::Error checkConfigTokens(const json::Object &config,
                                     const Tokenizer &tokenizer,
                                     llvm::StringRef path) {
  auto added = [&](llvm::StringRef field, llvm::StringRef text) -> llvm::Error {
    if (tokenizer.addedId(text) >= 0)
      return llvm::Error::success();
    return formatError(path + ": " + field + ": '" + text +
                       "' is not an added token of the tokenizer; "
                       "transformers would add it, and encode its text "
                       "otherwise");
  };
  for (const auto &[name, text] : specialTokensOf(config))
    if (llvm::Error error = added(name, text))
      return error;
  const json::Object *decoder = config.getObject("added_tokens_decoder");
  if (!decoder)
    return llvm::Error::success();
  for (const auto &[key, value] : *decoder) {
    llvm::StringRef written = key;
    const json::Object *token = value.getAsObject();
    std::optional<llvm::StringRef> content =
        token ? token->getString("content") : std::nullopt;
    if (!content)
      return formatError(path + ": added_tokens_decoder: id '" + written +
                         "' has no content");
    int64_t id;
    if (written.getAsInteger(10, id) || id < 0 ||
        id > std::numeric_limits<int32_t>::max())
      return formatError(llvm::formatv("{0}: added_tokens_decoder: '{1}' has "
                                       "id '{2}', which is no token id (0 to "
                                       "{3})",
                                       path, *content, written,
                                       std::numeric_limits<int32_t>::max()));
    if (llvm::Error error = added("added_tokens_decoder", *content))
      return error;
    if (int32_t own = tokenizer.addedId(*content); own != id)
      return formatError(llvm::formatv("{0}: added_tokens_decoder: '{1}' has "
                                       "id {2}, and {3} in the tokenizer",
                                       path, *content, id, own));
  }
  return llvm::Error::success();
}

llvm::Expected<ChatFormat> ChatFormat::find(const Tokenizer &tokenizer,
                                            llvm::StringRef tokenizerSource,
                                            llvm::StringRef templatePath,
                                            llvm::StringRef modelDir) {
  llvm::SmallString<256> jinja(modelDir), config(modelDir);
  llvm::sys::path::append(jinja, "chat_template.jinja");
  llvm::sys::path::append(config, "tokenizer_config.json");
  if (modelDir.empty() || !llvm::sys::fs::exists(config))
    config.clear();
  // The tokenizer_config.json given replaces the model folder's.
  if (templatePath.ends_with(".json"))
    config = templatePath;
  std::optional<json::Value> configJson;
  if (!config.empty()) {
    llvm::Expected<json::Value> read = readJsonFile(config, kMaxTokenizerBytes);
    if (!read)
      return read.takeError();
    configJson = std::move(*read);
  }
  const json::Object *configObject =
      configJson ? configJson->getAsObject() : nullptr;
  if (configObject)
    if (llvm::Error error = checkConfigTokens(*configObject, tokenizer, config))
      return std::move(error);
  std::string source = templatePath.str();
  if (source.empty() && !modelDir.empty()) {
    if (llvm::sys::fs::exists(jinja))
      source = jinja.str().str();
    else if (configObject && configObject->get("chat_template"))
      source = config.str().str();
  }
  if (source.empty()) {
    llvm::Expected<ChatFormat> framing = llama3(tokenizer, tokenizerSource);
    if (framing && configObject)
      framing->specialTokens = specialTokensOf(*configObject);
    return framing;
  }
  llvm::Expected<ChatTemplate> parsed = ChatTemplate::load(source);
  if (!parsed)
    return parsed.takeError();
  return withTemplate(tokenizer, std::move(*parsed),
                      configObject
                          ? specialTokensOf(*configObject)
                          : std::vector<std::pair<std::string, std::string>>(),
                      "the chat template of " + source);
}

llvm::Expected<std::string>
ChatFormat::render(llvm::ArrayRef<ChatMessage> messages, bool generationPrompt,
                   llvm::StringRef tools) const {
  std::string variables;
  llvm::raw_string_ostream os(variables);
  json::OStream out(os);
  out.object([&] {
    out.attributeArray("messages", [&] {
      for (const ChatMessage &message : messages) {
        if (!message.json.empty()) {
          out.rawValue(message.json);
          continue;
        }
        out.object([&] {
          out.attribute("role", message.role);
          out.attribute("content", message.content);
        });
      }
    });
    if (!tools.empty()) {
      out.attributeBegin("tools");
      out.rawValue(tools);
      out.attributeEnd();
    }
    out.attribute("add_generation_prompt", generationPrompt);
    for (const auto &[name, text] : specialTokens)
      out.attribute(name, text);
  });
  return chatTemplate->render(variables);
}

std::optional<llvm::StringRef>
ChatFormat::specialToken(llvm::StringRef name) const {
  for (const auto &[known, text] : specialTokens)
    if (known == name)
      return llvm::StringRef(text);
  return std::nullopt;
}

llvm::Expected<std::vector<int32_t>>
ChatFormat::templateIds(llvm::ArrayRef<ChatMessage> messages,
                        bool generationPrompt, llvm::StringRef tools) const {
  if (!chatTemplate)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "conversations are written by the model's chat template, and this "
        "model has none (give one with data.chat_template)");
  llvm::Expected<std::string> text = render(messages, generationPrompt, tools);
  if (!text)
    return text.takeError();
  return tokenizer->encode(*text, /*allowSpecial=*/true);
}

/// The tokens of `text` (encoded as `inputIds`, in `stretches`) before
/// `edge`: the first ones of the whole text, unless a token crosses the
/// edge. Only the stretch between added tokens that holds the edge is
/// encoded again.
static llvm::Expected<size_t>
tokensBefore(const Tokenizer &tokenizer, llvm::StringRef text,
             llvm::ArrayRef<Tokenizer::Stretch> stretches,
             llvm::ArrayRef<int32_t> inputIds, size_t edge) {
  if (edge == text.size())
    return inputIds.size();
  auto crossed = [] {
    return formatError("a trained turn starts or ends inside a token of "
                       "the template's text, so the token has no one "
                       "label (with data.train_on_input every token is "
                       "trained on)");
  };
  auto holding = llvm::upper_bound(
      stretches, edge, [](size_t offset, const Tokenizer::Stretch &s) {
        return offset < s.offset;
      });
  if (holding == stretches.begin())
    return crossed();
  const Tokenizer::Stretch &stretch = *std::prev(holding);
  if (stretch.offset == edge)
    return stretch.token;
  // Inside an added token's stretch: past its text, in the whitespace an
  // rstrip token takes with it (Phi-3's <|end|> and <|assistant|>).
  if (stretch.added)
    return stretch.token + 1;
  llvm::Expected<std::vector<int32_t>> start = tokenizer.encodeStretchStart(
      text.slice(stretch.offset, edge), stretch.offset == 0);
  if (!start)
    return start.takeError();
  llvm::ArrayRef<int32_t> after =
      llvm::ArrayRef(inputIds).drop_front(stretch.token);
  if (start->size() > after.size() ||
      !std::equal(start->begin(), start->end(), after.begin()))
    return crossed();
  return stretch.token + start->size();
}

llvm::Expected<std::pair<size_t, size_t>>
ChatFormat::turnSpan(llvm::ArrayRef<ChatMessage> messages, size_t index,
                     llvm::StringRef text, size_t previousEnd,
                     llvm::StringRef tools) const {
  llvm::Expected<std::string> prompt =
      render(messages.take_front(index), /*generationPrompt=*/true, tools);
  if (!prompt)
    return formatError(llvm::formatv("message {0}: the messages before it "
                                     "with the generation prompt: {1}",
                                     index,
                                     llvm::toString(prompt.takeError())));
  size_t begin = prompt->size();
  if (!text.starts_with(*prompt) || begin < previousEnd)
    return formatError(llvm::formatv(
        "message {0}: the template writes the messages before it, with "
        "the generation prompt, other than as the start of the whole "
        "conversation, so its turn cannot be told apart (with "
        "data.train_on_input every token is trained on)",
        index));
  // Its end: where the messages up to it, written alone, start the whole
  // text, their last special token (its end of turn; a tool call's
  // [TOOL_CALLS] or <|python_tag|> inside the turn is no end), else
  // their end; where a template writes a last turn otherwise (Qwen3's
  // empty <think> block), the first special token after its start.
  llvm::Expected<std::string> upTo =
      render(messages.take_front(index + 1), /*generationPrompt=*/false, tools);
  if (!upTo)
    return formatError(llvm::formatv("message {0}: the messages up to it: "
                                     "{1}",
                                     index, llvm::toString(upTo.takeError())));
  bool alone = text.starts_with(*upTo) && upTo->size() > begin;
  size_t limit = alone ? upTo->size() : text.size();
  std::optional<size_t> end;
  for (size_t at = begin; at < limit && !(end && !alone);) {
    size_t special = tokenizer->specialTokenAtStart(text.substr(at));
    if (special)
      end = at + special;
    at += special ? special : 1;
  }
  if (!end && alone)
    end = limit;
  if (!end)
    return formatError(llvm::formatv("message {0}: the template writes no "
                                     "special token after it to end its "
                                     "turn",
                                     index));
  return std::pair{begin, *end};
}

llvm::Expected<Example>
ChatFormat::tokenizeTemplate(llvm::ArrayRef<ChatMessage> messages,
                             llvm::ArrayRef<bool> trained,
                             llvm::StringRef tools) const {
  if (messages.empty())
    return formatError("a conversation needs a message");
  llvm::Expected<std::string> rendered = render(messages, false, tools);
  if (!rendered)
    return rendered.takeError();
  llvm::StringRef text = *rendered;
  // Rendered from JSON strings, so UTF-8; checked, as the offsets of the
  // stretches below are the text's own.
  if (!llvm::json::isUTF8(text))
    return formatError("the template's text is not UTF-8");
  Example example;
  std::vector<Tokenizer::Stretch> stretches;
  llvm::Expected<std::vector<int32_t>> inputIds =
      tokenizer->encode(text, stretches);
  if (!inputIds)
    return inputIds.takeError();
  example.inputIds = std::move(*inputIds);
  if (llvm::all_of(trained, [](bool train) { return train; })) {
    example.labels = example.inputIds;
    return example;
  }
  example.labels.assign(example.inputIds.size(), kIgnoreLabel);
  // Each trained turn renders the messages before it: bounded, as a line
  // of many turns would take their count times its size.
  size_t turns = llvm::count(trained, true);
  if (turns * text.size() > kMaxPromptRenderBytes)
    return formatError(llvm::formatv(
        "{0} trained turns of {1} bytes of text would render {0} prompts "
        "before them, more than {2} bytes: split the conversation (with "
        "data.train_on_input none is rendered)",
        turns, text.size(), kMaxPromptRenderBytes));
  size_t previousEnd = 0;
  for (size_t index = 0; index < messages.size(); ++index) {
    if (!trained[index])
      continue;
    llvm::Expected<std::pair<size_t, size_t>> span =
        turnSpan(messages, index, text, previousEnd, tools);
    if (!span)
      return span.takeError();
    auto [begin, end] = *span;
    llvm::Expected<size_t> first =
        tokensBefore(*tokenizer, text, stretches, example.inputIds, begin);
    if (!first)
      return first.takeError();
    llvm::Expected<size_t> last =
        tokensBefore(*tokenizer, text, stretches, example.inputIds, end);
    if (!last)
      return last.takeError();
    for (size_t token = *first; token < *last; ++token)
      example.labels[token] = example.inputIds[token];
    previousEnd = end;
  }
  return example;
}

llvm::Expected<Example>
ChatFormat::tokenize(llvm::ArrayRef<ChatMessage> messages,
                     llvm::ArrayRef<bool> trained,
                     llvm::StringRef tools) const {
  if (chatTemplate)
    return tokenizeTemplate(messages, trained, tools);
  if (llvm::Error error = checkConversation(messages))
    return std::move(error);
  return tokenizeConversation(*tokenizer, messages, trained);
}
