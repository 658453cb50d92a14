//===- TokenizerRoundTrip.h - use a tokenizer a fuzz input made ---*- C++ -*-===//

#ifndef TWILL_FUZZ_TOKENIZERROUNDTRIP_H
#define TWILL_FUZZ_TOKENIZERROUNDTRIP_H

#include "fuzz/FuzzInput.h"
#include "runtime/data/Tokenizer.h"

#include <cstdio>
#include <cstdlib>

namespace twill::fuzz {

/// Encodes a text (special tokens, digits, non-ASCII, bytes that are not
/// UTF-8) and decodes it again: every id a tokenizer that loaded gives must
/// decode, and with `lossless` (a byte-level vocabulary of every byte, as a
/// tiktoken file's is) give back the text, and a chat encodes.
inline void roundTrip(const Tokenizer &tokenizer, bool lossless) {
  const char *text = "Hello, world! 12345 <|eot_id|> \xc3\xa9t\xc3\xa9\n\t x";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids = tokenizer.encode(text, special);
    auto decoded = tokenizer.decode(ids);
    std::string *back = valueOrNull(decoded);
    if (!back || (lossless && *back != text)) {
      std::fprintf(stderr, "a loaded tokenizer does not round-trip\n");
      std::abort();
    }
  }
  tokenizer.encode("bad \xff\xfe UTF-8 \xe2\x82", true);
  if (lossless)
    tokenizer.encodeChat({{"user", "hi"}, {"assistant", "<|eot_id|>"}},
                         /*generationPrompt=*/true);
}

} // namespace twill::fuzz

#endif // TWILL_FUZZ_TOKENIZERROUNDTRIP_H
