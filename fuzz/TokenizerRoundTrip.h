//===- TokenizerRoundTrip.h - use a tokenizer a fuzz input made ---*- C++ -*-===//

#ifndef TWILL_FUZZ_TOKENIZERROUNDTRIP_H
#define TWILL_FUZZ_TOKENIZERROUNDTRIP_H

#include "fuzz/FuzzInput.h"
#include "runtime/data/Tokenizer.h"

#include <cstdio>
#include <cstdlib>

namespace twill::fuzz {

/// Encodes a text (a chat, special tokens, digits, non-ASCII) and decodes
/// it again: a tokenizer that loaded must give back the text it encoded.
inline void roundTrip(const Tokenizer &tokenizer) {
  const char *text = "Hello, world! 12345 <|eot_id|> \xc3\xa9t\xc3\xa9\n\t x";
  std::vector<int32_t> ids = tokenizer.encode(text, /*allowSpecial=*/false);
  auto decoded = tokenizer.decode(ids);
  if (std::string *back = valueOrNull(decoded); !back || *back != text) {
    std::fprintf(stderr, "a loaded tokenizer does not round-trip\n");
    std::abort();
  }
  tokenizer.encodeChat({{"user", "hi"}, {"assistant", "<|eot_id|>"}},
                       /*generationPrompt=*/true);
}

} // namespace twill::fuzz

#endif // TWILL_FUZZ_TOKENIZERROUNDTRIP_H
