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

/// Reads tokenizer.json at `path`; an error names the file and the part.
llvm::Expected<TokenizerParts> readTokenizerJson(llvm::StringRef path);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_TOKENIZER_TOKENIZERJSON_H
