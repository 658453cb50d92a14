//===- TextDataset.h - alpaca and chat JSONL into examples ------*- C++ -*-===//
//
// Text datasets, each example a conversation in the model's chat format
// (ChatFormat: its own template, or Llama 3's framing):
//
// - alpaca: {"instruction", "input", "output"} per line, as a user message
//   holding torchtune's alpaca prompt (with or without the input) and an
//   assistant message holding the output;
// - chat: {"messages": [{"role", "content"}, ...]} per line (OpenAI's form;
//   to a template each message as written, tool_calls and all, and the
//   line's "tools"), or ShareGPT's {"conversations": [{"from", "value"},
//   ...]} (system, human, gpt).
// A message needs a content (or, an answer, tool calls), and with a
// template a role it renders: OpenAI's, Llama 3.1's ipython, or one the
// template names; anything else is refused, naming the line and message,
// not rendered as a turn the model never sees trained.
// Without `trainOnInput` only the assistant messages are trained on.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TEXTDATASET_H
#define TWILL_RUNTIME_DATA_TEXTDATASET_H

#include "runtime/data/ChatFormat.h"

namespace twill {

/// torchtune's alpaca prompt for an instruction and its (maybe empty) input.
std::string alpacaPrompt(llvm::StringRef instruction, llvm::StringRef input);

/// Reads and tokenizes every line of `path`; a malformed line is an error
/// naming the file and the line.
llvm::Expected<std::vector<Example>> readAlpacaJsonl(llvm::StringRef path,
                                                     const ChatFormat &format,
                                                     bool trainOnInput);
llvm::Expected<std::vector<Example>> readChatJsonl(llvm::StringRef path,
                                                   const ChatFormat &format,
                                                   bool trainOnInput);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TEXTDATASET_H
