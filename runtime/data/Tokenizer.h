//===- Tokenizer.h - text to token ids and back -----------------*- C++ -*-===//
//
// A Hugging Face tokenizer.json in general (tokenizers' pipeline: added
// tokens, normalizer, pre-tokenizer, BPE model, post-processor, decoder;
// runtime/data/tokenizer/), or the tiktoken-format `tokenizer.model` Meta
// ships with Llama 3 (one base64 token and its rank per line; rank = id),
// which is that pipeline too: Llama 3's pattern, GPT-2's byte alphabet, and
// the 256 special tokens after the 128000 base ones.
//
// Text is UTF-8; bytes that are not become U+FFFD first, as Python's
// decode(errors="replace") makes them before tokenizers sees them.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_H
#define TWILL_RUNTIME_DATA_TOKENIZER_H

#include "runtime/data/tokenizer/TokenizerJson.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <bitset>
#include <memory>
#include <string>
#include <vector>

namespace twill {

struct ChatMessage {
  std::string role, content;
  /// The message as its file writes it (a JSON object's text), which a
  /// chat template reads whole: tool_calls and any other field, in their
  /// order. Empty: {"role", "content"}.
  std::string json = {};
};

class Tokenizer {
public:
  /// Loads `path`; an error names the file and the line.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  loadTiktoken(llvm::StringRef path);
  /// Loads a Hugging Face tokenizer.json; a construct it does not build is
  /// refused by name.
  static llvm::Expected<std::unique_ptr<Tokenizer>>
  loadHuggingFace(llvm::StringRef path);
  /// loadHuggingFace for a .json file, loadTiktoken otherwise.
  static llvm::Expected<std::unique_ptr<Tokenizer>> load(llvm::StringRef path);
  /// The tokenizer file of model folder `dir`: its tokenizer.json, else its
  /// original/tokenizer.model (Llama 3's); an error says where it looked.
  static llvm::Expected<std::string> findInModel(llvm::StringRef dir);

  /// The ids of `text` as tokenizers' encode(text, add_special_tokens=False)
  /// gives them; special tokens written in it (`<|eot_id|>`) are recognised
  /// only when `allowSpecial` (tokenizers' split_special_tokens otherwise).
  /// Fails where a pattern of the tokenizer gives up on the text (as
  /// tokenizers fails there); so do the encodings below.
  llvm::Expected<std::vector<int32_t>> encode(llvm::StringRef text,
                                              bool allowSpecial) const;
  /// A stretch of an input that encode() encodes on its own: one between
  /// the added tokens in it, or one of them. `offset`: the byte it starts
  /// at; `token`: the index of its first token.
  struct Stretch {
    size_t offset, token;
    bool added;
  };
  /// encode(text, true), and its stretches; `text` must be valid UTF-8
  /// (the offsets are its own).
  llvm::Expected<std::vector<int32_t>>
  encode(llvm::StringRef text, std::vector<Stretch> &stretches) const;
  /// The ids of `text`, the start of a stretch between added tokens
  /// (`startsInput`: at the input's start), as the whole input's encoding
  /// gives them where no token crosses the end of `text`.
  llvm::Expected<std::vector<int32_t>>
  encodeStretchStart(llvm::StringRef text, bool startsInput) const;
  /// Llama 3's chat format as llama-models' ChatFormat writes it:
  /// <|begin_of_text|>, then per message a header
  /// (<|start_header_id|>role<|end_header_id|>\n\n), the content as it is
  /// (Hugging Face's template and torchtune strip it first) and <|eot_id|>;
  /// with `generationPrompt`, an assistant header last.
  llvm::Expected<std::vector<int32_t>>
  encodeChat(llvm::ArrayRef<ChatMessage> messages, bool generationPrompt) const;
  /// The text of `ids` through the decoder (special tokens included);
  /// fails on an id outside the vocabulary.
  llvm::Expected<std::string> decode(llvm::ArrayRef<int32_t> ids) const;

  /// The id of special token `name` (such as "<|eot_id|>"), or -1.
  int32_t specialId(llvm::StringRef name) const;
  /// The id of added token `content` (special or not), or -1.
  int32_t addedId(llvm::StringRef content) const;
  /// The length of the longest special token `text` starts with, or 0.
  size_t specialTokenAtStart(llvm::StringRef text) const;
  /// One past the largest id.
  int64_t vocabSize() const;
  /// The ids the post-processor puts before and after a text when special
  /// tokens are added (a BOS token before, as Llama's).
  llvm::ArrayRef<int32_t> prefixIds() const { return parts.prefix; }
  llvm::ArrayRef<int32_t> suffixIds() const { return parts.suffix; }

private:
  Tokenizer(TokenizerParts parts, llvm::StringRef path);
  /// `error` (a pattern's) as an error of the file.
  llvm::Error inFile(llvm::Error error) const;
  /// Appends the ids of `text` (valid UTF-8, no added tokens split off
  /// yet): normalized, cut at normalized added tokens, pre-tokenized,
  /// encoded piece by piece. `atStart`: it starts the input.
  llvm::Error encodeText(llvm::StringRef text, bool atStart, bool allowSpecial,
                         std::vector<int32_t> &ids) const;
  /// The ids of valid UTF-8 `text`, and its stretches if asked.
  llvm::Expected<std::vector<int32_t>>
  encodeStretches(llvm::StringRef text, bool allowSpecial,
                  std::vector<Stretch> *stretches) const;

  TokenizerParts parts;
  std::string path; // the file read, which errors name
  /// The bytes a special token starts with: most text has none of them.
  std::bitset<256> specialFirstBytes;
};

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_H
