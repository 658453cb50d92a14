//===- Tokenizer.h - Llama 3's byte-level BPE -------------------*- C++ -*-===//
//
// Reads the tiktoken-format `tokenizer.model` Meta ships with Llama 3
// (one base64 token and its rank per line; rank = id) or the Hugging Face
// tokenizer.json of the same vocabulary, splits text with
// Llama 3's pre-tokenization pattern (PCRE2, Unicode classes, lookahead),
// merges each piece's bytes pair by pair, lowest rank first, and adds the
// 256 special tokens after the 128000 base ones. Ids are tiktoken's.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_H
#define TWILL_RUNTIME_DATA_TOKENIZER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace twill {

struct ChatMessage {
  std::string role, content;
};

class Tokenizer {
public:
  /// Loads `path`; an error names the file and the line.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  loadTiktoken(llvm::StringRef path);
  /// Loads a Hugging Face tokenizer.json of a byte-level BPE (Llama 3's):
  /// the vocab in GPT-2's byte alphabet, ids as ranks, the added tokens as
  /// the special tokens after it.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  loadHuggingFace(llvm::StringRef path);
  /// loadHuggingFace for a .json file, loadTiktoken otherwise.
  static llvm::Expected<std::unique_ptr<Tokenizer>> load(llvm::StringRef path);
  ~Tokenizer();

  /// The ids of `text`; special tokens written in it (`<|eot_id|>`) are
  /// recognised only when `allowSpecial`, as tiktoken's allowed_special.
  std::vector<int32_t> encode(llvm::StringRef text, bool allowSpecial) const;
  /// Llama 3's chat format as llama-models' ChatFormat writes it:
  /// <|begin_of_text|>, then per message a header
  /// (<|start_header_id|>role<|end_header_id|>\n\n), the content as it is
  /// (Hugging Face's template and torchtune strip it first) and <|eot_id|>;
  /// with `generationPrompt`, an assistant header last.
  std::vector<int32_t> encodeChat(llvm::ArrayRef<ChatMessage> messages,
                                  bool generationPrompt) const;
  /// The text of `ids`; fails on an id outside the vocabulary.
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const;

  /// The id of special token `name` (such as "<|eot_id|>"), or -1.
  int32_t specialId(llvm::StringRef name) const;
  int64_t vocabSize() const { return tokens.size(); }

private:
  Tokenizer() = default;
  /// Checks that every byte has a token (byte-level BPE needs them all:
  /// without one, text would have no encoding), adds `specials` after the
  /// vocab and compiles the pattern; `path` names the file in errors.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  finish(std::unique_ptr<Tokenizer> tokenizer,
         std::vector<std::string> specials, llvm::StringRef path);
  void encodeOrdinary(llvm::StringRef text, std::vector<int32_t> &ids) const;
  void bytePairEncode(llvm::StringRef piece, std::vector<int32_t> &ids) const;

  llvm::StringMap<int32_t> ranks;  // token bytes -> id, base and special
  std::vector<std::string> tokens; // id -> token bytes
  std::vector<std::string> specials;
  struct Pattern;
  std::unique_ptr<Pattern> pattern;
};

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_H
