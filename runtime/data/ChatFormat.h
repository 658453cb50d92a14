//===- ChatFormat.h - conversations into tokens and labels ------*- C++ -*-===//
//
// How a conversation becomes what the model trains on.
//
// A model with a chat template is fed the template's text as transformers'
// apply_chat_template renders and tokenizes it: the messages, the special
// tokens' text of its tokenizer_config.json (bos_token, eos_token, ...),
// special tokens written in the text recognised and none added. A trained
// message is trained on as its turn, the text the template writes for it:
// from the end of the generation prompt before it (the messages before it
// rendered with add_generation_prompt, which must be the start of the whole
// text) to its end of turn (<|eot_id|>, <|im_end|>, <end_of_turn>, </s>:
// what the model must learn to write to stop): the last special token of
// the messages up to it rendered alone, where that starts the whole text
// (so a tool call's [TOOL_CALLS] inside the turn is no end), else the first
// special token after its start. The labels follow tokens: the text before
// each edge of a turn must encode to the first tokens of the whole text, or
// the conversation is refused (a token across the edge would have no one
// label).
//
// A model without a template gets Llama 3's framing as torchtune (0.5/0.6)
// writes it: <|begin_of_text|>, then per message a header
// (<|start_header_id|>, the role, <|end_header_id|>, "\n\n"), the content
// stripped of surrounding whitespace and <|eot_id|>, and <|end_of_text|>
// last; a message's tokens are trained on or not as a whole, the begin and
// end tokens never; the conversation is checked as torchtune checks it.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_CHATFORMAT_H
#define TWILL_RUNTIME_DATA_CHATFORMAT_H

#include "runtime/data/TokenizedDataset.h"
#include "runtime/data/Tokenizer.h"
#include "runtime/data/template/ChatTemplate.h"

#include <optional>

namespace twill {

class ChatFormat {
public:
  /// Llama 3's framing; fails, naming `source` (the tokenizer's file) and
  /// the token, unless `tokenizer` has its special tokens.
  static llvm::Expected<ChatFormat> llama3(const Tokenizer &tokenizer,
                                           llvm::StringRef source);
  /// `chatTemplate`, given `specialTokens` (name and text, such as
  /// bos_token and "<s>") as variables.
  static ChatFormat
  withTemplate(const Tokenizer &tokenizer, ChatTemplate chatTemplate,
               std::vector<std::pair<std::string, std::string>> specialTokens,
               std::string description);
  /// A job's or a tool's format: the template at `templatePath` (a
  /// tokenizer_config.json or a .jinja file) if given, else model folder
  /// `modelDir`'s (its chat_template.jinja, else its tokenizer_config.json's
  /// chat_template), the special tokens' text from the tokenizer_config.json
  /// given or beside it; Llama 3's framing where neither has a template.
  static llvm::Expected<ChatFormat> find(const Tokenizer &tokenizer,
                                         llvm::StringRef tokenizerSource,
                                         llvm::StringRef templatePath,
                                         llvm::StringRef modelDir);

  /// Where the format comes from, for the log.
  const std::string &description() const { return from; }

  /// Whether the model's own template formats the conversations.
  bool hasTemplate() const { return chatTemplate.has_value(); }
  /// Whether a message may have role `role`: OpenAI's roles and Llama
  /// 3.1's ipython, or one the template names (GLM's "observation").
  bool knowsRole(llvm::StringRef role) const;

  /// The tokens and labels of `messages`; `trained[i]` says whether message
  /// i is trained on; `tools`, a JSON list's text, the template's `tools`.
  /// An error says why the conversation is refused.
  llvm::Expected<Example> tokenize(llvm::ArrayRef<ChatMessage> messages,
                                   llvm::ArrayRef<bool> trained,
                                   llvm::StringRef tools = {}) const;

  /// The text of special token `name` ("eos_token", ...) as the
  /// tokenizer_config.json gives it, if it does.
  std::optional<llvm::StringRef> specialToken(llvm::StringRef name) const;

  /// The ids of the template's text for `messages`, as transformers'
  /// apply_chat_template(tokenize=True) gives them (special tokens written
  /// in the text recognised, none added); an error without a template.
  llvm::Expected<std::vector<int32_t>>
  templateIds(llvm::ArrayRef<ChatMessage> messages, bool generationPrompt,
              llvm::StringRef tools = {}) const;

private:
  explicit ChatFormat(const Tokenizer &tokenizer) : tokenizer(&tokenizer) {}
  /// The template's text for `messages`.
  llvm::Expected<std::string> render(llvm::ArrayRef<ChatMessage> messages,
                                     bool generationPrompt,
                                     llvm::StringRef tools) const;
  llvm::Expected<Example> tokenizeTemplate(llvm::ArrayRef<ChatMessage> messages,
                                           llvm::ArrayRef<bool> trained,
                                           llvm::StringRef tools) const;
  /// Where message `index`'s turn lies in `text`, the whole conversation
  /// rendered: after the messages before it with the generation prompt,
  /// to its end-of-turn token; no earlier than `previousEnd`.
  llvm::Expected<std::pair<size_t, size_t>>
  turnSpan(llvm::ArrayRef<ChatMessage> messages, size_t index,
           llvm::StringRef text, size_t previousEnd,
           llvm::StringRef tools) const;

  const Tokenizer *tokenizer;
  std::optional<ChatTemplate> chatTemplate;
  std::vector<std::pair<std::string, std::string>> specialTokens;
  std::string from;
};

/// Llama 3's framing of `messages` (torchtune's); `trained[i]` says whether
/// message i is trained on. An error is the tokenizer's.
llvm::Expected<Example>
tokenizeConversation(const Tokenizer &tokenizer,
                     llvm::ArrayRef<ChatMessage> messages,
                     llvm::ArrayRef<bool> trained);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_CHATFORMAT_H
