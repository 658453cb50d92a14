//===- TextDataset.h - alpaca and chat JSONL into examples ------*- C++ -*-===//
//
// Text datasets tokenized as torchtune (0.5/0.6) tokenizes them for Llama 3:
// <|begin_of_text|>, then per message a header (<|start_header_id|>, the
// role, <|end_header_id|>, "\n\n"), the content stripped of surrounding
// whitespace and <|eot_id|>, and <|end_of_text|> last. A message's tokens
// are trained on or not as a whole; the begin and end tokens never are.
//
// - alpaca: {"instruction", "input", "output"} per line, as a user message
//   holding torchtune's alpaca prompt (with or without the input) and an
//   assistant message holding the output;
// - chat: {"messages": [{"role", "content"}, ...]} per line (OpenAI's form),
//   checked as torchtune checks it: at least two messages, a system message
//   only first, no two user messages in a row, every assistant message after
//   a user one.
// Without `trainOnInput` only the assistant messages are trained on.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TEXTDATASET_H
#define TWILL_RUNTIME_DATA_TEXTDATASET_H

#include "runtime/data/TokenizedDataset.h"
#include "runtime/data/Tokenizer.h"

namespace twill {

/// Tokens and labels (the token where trained on, kIgnoreLabel elsewhere)
/// of a conversation; `trained[i]` says whether message i is trained on.
Example tokenizeConversation(const Tokenizer &tokenizer,
                             llvm::ArrayRef<ChatMessage> messages,
                             llvm::ArrayRef<bool> trained);

/// Fails, naming `source` (the tokenizer's file) and the token, unless
/// `tokenizer` has the Llama 3 special tokens a conversation is framed
/// with (a tokenizer without them would make ids outside any vocabulary).
llvm::Error checkConversationTokens(const Tokenizer &tokenizer,
                                    llvm::StringRef source);

/// torchtune's alpaca prompt for an instruction and its (maybe empty) input.
std::string alpacaPrompt(llvm::StringRef instruction, llvm::StringRef input);

/// Reads and tokenizes every line of `path`; a malformed line is an error
/// naming the file and the line.
llvm::Expected<std::vector<Example>> readAlpacaJsonl(llvm::StringRef path,
                                                     const Tokenizer &tokenizer,
                                                     bool trainOnInput);
llvm::Expected<std::vector<Example>> readChatJsonl(llvm::StringRef path,
                                                   const Tokenizer &tokenizer,
                                                   bool trainOnInput);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TEXTDATASET_H
