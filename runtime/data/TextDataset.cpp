//===- TextDataset.cpp - alpaca and chat JSONL into examples --------------===//

#include "runtime/data/TextDataset.h"

#include "runtime/data/JsonLines.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;
namespace json = llvm::json;

static llvm::Error lineError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

Example twill::tokenizeConversation(const Tokenizer &tokenizer,
                                    llvm::ArrayRef<ChatMessage> messages,
                                    llvm::ArrayRef<bool> trained) {
  Example example;
  auto append = [&](llvm::ArrayRef<int32_t> ids, bool train) {
    example.inputIds.insert(example.inputIds.end(), ids.begin(), ids.end());
    for (int32_t id : ids)
      example.labels.push_back(train ? id : kIgnoreLabel);
  };
  append({tokenizer.specialId("<|begin_of_text|>")}, false);
  for (auto [message, train] : llvm::zip_equal(messages, trained)) {
    append({tokenizer.specialId("<|start_header_id|>")}, train);
    append(tokenizer.encode(llvm::StringRef(message.role).trim(), false),
           train);
    append({tokenizer.specialId("<|end_header_id|>")}, train);
    append(tokenizer.encode("\n\n", false), train);
    append(tokenizer.encode(llvm::StringRef(message.content).trim(), false),
           train);
    append({tokenizer.specialId("<|eot_id|>")}, train);
  }
  append({tokenizer.specialId("<|end_of_text|>")}, false);
  return example;
}

llvm::Error twill::checkConversationTokens(const Tokenizer &tokenizer,
                                           llvm::StringRef source) {
  for (llvm::StringRef name :
       {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eot_id|>", "<|end_of_text|>"})
    if (tokenizer.specialId(name) < 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          source + ": has no special token '" + name +
              "', which alpaca and chat rows are framed with: `tokenizer` "
              "must be a Llama 3 tokenizer.model or tokenizer.json");
  return llvm::Error::success();
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
twill::readAlpacaJsonl(llvm::StringRef path, const Tokenizer &tokenizer,
                       bool trainOnInput) {
  std::vector<Example> examples;
  llvm::Error error = readJsonLines(
      path, [&](const json::Object &line, int64_t lineNumber) -> llvm::Error {
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
        examples.push_back(tokenizeConversation(tokenizer, messages, trained));
        examples.back().line = lineNumber;
        return llvm::Error::success();
      });
  if (error)
    return std::move(error);
  return examples;
}

/// torchtune's checks of a conversation.
static llvm::Error checkConversation(llvm::ArrayRef<ChatMessage> messages) {
  if (messages.size() < 2)
    return lineError("a conversation needs at least two messages");
  for (auto [index, message] : llvm::enumerate(messages)) {
    llvm::StringRef role = message.role;
    if (role != "system" && role != "user" && role != "assistant" &&
        role != "ipython")
      return lineError(llvm::formatv("message {0}: role '{1}' is none of "
                                     "system, user, assistant, ipython",
                                     index, role)
                           .str());
    // Not `cond ? role : ""`: that makes a temporary std::string.
    llvm::StringRef previous =
        index ? llvm::StringRef(messages[index - 1].role) : llvm::StringRef();
    if (role == "system" && index != 0)
      return lineError(llvm::formatv("message {0}: a system message must "
                                     "come first",
                                     index)
                           .str());
    if (role == "user" && previous == "user")
      return lineError(llvm::formatv("messages {0} and {1} are both from the "
                                     "user",
                                     index - 1, index)
                           .str());
    if (role == "assistant" && previous != "user")
      return lineError(llvm::formatv("message {0}: an assistant message must "
                                     "follow a user message",
                                     index)
                           .str());
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<Example>>
twill::readChatJsonl(llvm::StringRef path, const Tokenizer &tokenizer,
                     bool trainOnInput) {
  std::vector<Example> examples;
  llvm::Error error = readJsonLines(
      path, [&](const json::Object &line, int64_t lineNumber) -> llvm::Error {
        // OpenAI's {"messages": [{"role", "content"}]}, or ShareGPT's
        // {"conversations": [{"from", "value"}]}.
        const json::Array *list = line.getArray("messages");
        bool shareGpt = !list && (list = line.getArray("conversations"));
        if (!list)
          return lineError("expected 'messages': a list of {\"role\", "
                           "\"content\"} (or ShareGPT's 'conversations': a "
                           "list of {\"from\", \"value\"})");
        std::vector<ChatMessage> messages;
        llvm::SmallVector<bool, 8> trained; // (std::vector<bool> has no array)
        for (const json::Value &value : *list) {
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
          }
          llvm::Expected<std::string> content =
              stringField(*message, shareGpt ? "value" : "content");
          if (!content)
            return content.takeError();
          trained.push_back(trainOnInput || *role == "assistant");
          messages.push_back({*role, *content});
        }
        if (llvm::Error error = checkConversation(messages))
          return error;
        examples.push_back(tokenizeConversation(tokenizer, messages, trained));
        examples.back().line = lineNumber;
        return llvm::Error::success();
      });
  if (error)
    return std::move(error);
  return examples;
}
