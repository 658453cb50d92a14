//===- TokenizerJson.h - reading a Hugging Face tokenizer.json --*- C++ -*-===//
//
// The parts of a tokenizer (tokenizers' pipeline: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor, decoder) as tokenizer.json
// describes them. Every construct is built or refused by name: none is
// skipped.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_TOKENIZER_TOKENIZERJSON_H
#define TWILL_RUNTIME_DATA_TOKENIZER_TOKENIZERJSON_H

#include "runtime/data/tokenizer/AddedTokens.h"
#include "runtime/data/tokenizer/Bpe.h"
#include "runtime/data/tokenizer/Pipeline.h"

#include "llvm/Support/Error.h"

namespace twill {

struct TokenizerParts {
  AddedTokens added;
  std::vector<NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> preTokenizers;
  BpeModel model;
  std::vector<DecoderStep> decoders;
  /// The post-processor's template for one text: the ids before and after
  /// it (a BOS token) when special tokens are added.
  std::vector<int32_t> prefix, suffix;
};

/// Reads tokenizer.json at `path` (or Mistral's Tekken JSON, which is
/// tiktoken's format with Mistral's special tokens first); an error names
/// the file and the part.
llvm::Expected<TokenizerParts> readTokenizerJson(llvm::StringRef path);

/// tiktoken's rules on `parts`, whose model holds a byte-level vocabulary
/// ranked by id: text cut by `pattern`, then written in GPT-2's byte
/// alphabet; merges ranked by the ids they make; a piece that is a token
/// is that token; decoded byte by byte.
void useTiktokenRules(TokenizerParts &parts, llvm::StringRef pattern);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_TOKENIZERJSON_H
