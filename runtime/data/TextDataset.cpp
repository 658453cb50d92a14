//===- TextDataset.cpp - alpaca and chat JSONL into examples --------------===//

#include "runtime/data/TextDataset.h"

#include "runtime/data/JsonLines.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;
namespace json = llvm::json;

static llvm::Error lineError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

std::string twill::alpacaPrompt(llvm::StringRef instruction,
                                llvm::StringRef input) {
  if (input.empty())
    return llvm::formatv("Below is an instruction that describes a task. "
                         "Write a response that appropriately completes the "
                         "request.\n\n### Instruction:\n{0}\n\n### "
                         "Response:\n",
                         instruction);
  return llvm::formatv("Below is an instruction that describes a task, paired "
                       "with an input that provides further context. Write a "
                       "response that appropriately completes the request."
                       "\n\n### Instruction:\n{0}\n\n### Input:\n{1}\n\n### "
                       "Response:\n",
                       instruction, input);
}

/// Keeps the example of line `lineNumber`, or its error.
static llvm::Error addExample(llvm::Expected<Example> example,
                              int64_t lineNumber,
                              std::vector<Example> &examples) {
  if (!example)
    return example.takeError();
  examples.push_back(std::move(*example));
  examples.back().line = lineNumber;
  return llvm::Error::success();
}

/// The string field `key` of `line` (`optional`: "" when absent).
static llvm::Expected<std::string> stringField(const json::Object &line,
                                               llvm::StringRef key,
                                               bool optional = false) {
  const json::Value *value = line.get(key);
  if (!value) {
    if (optional)
      return "";
    return lineError("no '" + key + "'");
  }
  std::optional<llvm::StringRef> text = value->getAsString();
  if (!text)
    return lineError("'" + key + "' must be a string");
  return text->str();
}

llvm::Expected<std::vector<Example>>
twill::readAlpacaJsonl(llvm::StringRef path, const ChatFormat &format,
                       bool trainOnInput) {
  std::vector<Example> examples;
  llvm::Error error = readJsonLines(
      path,
      [&](const json::Object &line, llvm::StringRef text,
          int64_t lineNumber) -> llvm::Error {
        llvm::Expected<std::string> instruction =
            stringField(line, "instruction");
        if (!instruction)
          return instruction.takeError();
        llvm::Expected<std::string> input = stringField(line, "input", true);
        if (!input)
          return input.takeError();
        llvm::Expected<std::string> output = stringField(line, "output");
        if (!output)
          return output.takeError();
        ChatMessage messages[] = {{"user", alpacaPrompt(*instruction, *input)},
                                  {"assistant", *output}};
        bool trained[] = {trainOnInput, true};
        return addExample(format.tokenize(messages, trained), lineNumber,
                          examples);
      });
  if (error)
    return std::move(error);
  return examples;
}

/// Why message `index`'s role is refused: none a template renders.
static std::string unknownRole(size_t index, llvm::StringRef role) {
  llvm::StringRef meant =
      llvm::StringSwitch<llvm::StringRef>(role)
          .Cases("human", "User", "user")
          .Cases("gpt", "bot", "model", "Assistant", "assistant")
          .Default("");
  return llvm::formatv("message {0}: role '{1}' is none of OpenAI's roles "
                       "(system, developer, user, assistant, tool) nor one the "
                       "chat template names, so the message would be "
                       "rendered as nothing the model knows{2}",
                       index, role,
                       meant.empty()
                           ? std::string()
                           : llvm::formatv(": did you mean '{0}'? (ShareGPT's "
                                           "human and gpt are read from "
                                           "'conversations' of {{\"from\", "
                                           "\"value\"})",
                                           meant)
                                 .str());
}

/// Why message `index` is refused: it has no content (nor tool calls),
/// naming the keys it has.
static std::string missingContent(size_t index, const json::Object &message,
                                  bool shareGpt) {
  std::vector<std::string> keys;
  for (const auto &entry : message)
    keys.push_back("'" + entry.first.str() + "'");
  llvm::sort(keys);
  return llvm::formatv("message {0} has no '{1}'{2} (its keys: {3})", index,
                       shareGpt ? "value" : "content",
                       shareGpt ? "" : " nor 'tool_calls'",
                       llvm::join(keys, ", "));
}

llvm::Expected<std::vector<Example>>
twill::readChatJsonl(llvm::StringRef path, const ChatFormat &format,
                     bool trainOnInput) {
  std::vector<Example> examples;
  llvm::Error error = readJsonLines(
      path,
      [&](const json::Object &line, llvm::StringRef text,
          int64_t lineNumber) -> llvm::Error {
        // OpenAI's {"messages": [{"role", "content"}]}, or ShareGPT's
        // {"conversations": [{"from", "value"}]}.
        const json::Array *list = line.getArray("messages");
        bool shareGpt = !list && (list = line.getArray("conversations"));
        if (!list)
          return lineError("expected 'messages': a list of {\"role\", "
                           "\"content\"} (or ShareGPT's 'conversations': a "
                           "list of {\"from\", \"value\"})");
        // Each message as written goes to a template whole (tool_calls and
        // every other field, its keys in their order), as the line's tools.
        std::vector<llvm::StringRef> written;
        llvm::StringRef tools;
        if (format.hasTemplate() && !shareGpt) {
          written = jsonElementTexts(jsonMemberText(text, "messages"));
          tools = jsonMemberText(text, "tools");
          // (A key written with escapes is not found as written.)
          if (written.size() != list->size() ||
              (line.get("tools") && tools.empty()))
            return lineError("'messages' or 'tools' cannot be read as "
                             "written (a key with escapes in it?)");
        } else if (line.get("tools")) {
          return lineError(shareGpt ? "'tools' go to the chat template with "
                                      "OpenAI's 'messages', not ShareGPT's "
                                      "'conversations'"
                                    : "'tools' are written by the model's chat "
                                      "template, and this model has none");
        }
        std::vector<ChatMessage> messages;
        llvm::SmallVector<bool, 8> trained; // (std::vector<bool> has no array)
        for (auto [index, value] : llvm::enumerate(*list)) {
          const json::Object *message = value.getAsObject();
          if (!message)
            return lineError("each message must be an object");
          llvm::Expected<std::string> role =
              stringField(*message, shareGpt ? "from" : "role");
          if (!role)
            return role.takeError();
          if (shareGpt) {
            static const std::pair<llvm::StringLiteral, llvm::StringLiteral>
                roles[] = {{"system", "system"},
                           {"human", "user"},
                           {"gpt", "assistant"}};
            auto *known = llvm::find_if(
                roles, [&](const auto &pair) { return pair.first == *role; });
            if (known == std::end(roles))
              return lineError("ShareGPT's 'from' '" + *role +
                               "' is not supported; allowed: system, human, "
                               "gpt");
            *role = known->second.str();
          } else if (format.hasTemplate() && !format.knowsRole(*role)) {
            return lineError(unknownRole(index, *role));
          }
          // A template reads what it needs: an answer of tool calls may
          // have no content.
          const json::Value *given =
              message->get(shareGpt ? "value" : "content");
          if (!given && !message->get("tool_calls"))
            return lineError(missingContent(index, *message, shareGpt));
          bool none = !given || given->kind() == json::Value::Null;
          llvm::Expected<std::string> content =
              none && index < written.size()
                  ? std::string()
                  : stringField(*message, shareGpt ? "value" : "content");
          if (!content)
            return content.takeError();
          trained.push_back(trainOnInput || *role == "assistant");
          messages.push_back(
              {*role, *content,
               index < written.size() ? written[index].str() : std::string()});
        }
        return addExample(format.tokenize(messages, trained, tools), lineNumber,
                          examples);
      });
  if (error)
    return std::move(error);
  return examples;
}
