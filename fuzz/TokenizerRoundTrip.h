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
/// tiktoken file's is) give back the text, and a chat encodes. A pattern
/// that gives up on a text (a fuzzed regex's backtracking) is a named
/// error, no finding.
inline void roundTrip(const Tokenizer &tokenizer, bool lossless) {
  const char *text = "Hello, world! 12345 <|eot_id|> \xc3\xa9t\xc3\xa9\n\t x";
  for (bool special : {false, true}) {
    auto ids = tokenizer.encode(text, special);
    std::vector<int32_t> *encoded = valueOrNull(ids);
    if (!encoded)
      continue;
    auto decoded = tokenizer.decode(*encoded);
    if (!decoded) {
      std::string why = llvm::toString(decoded.takeError());
      if (llvm::StringRef(why).contains("gives up matching"))
        continue;
      std::fprintf(stderr, "an id a tokenizer gave does not decode: %s\n",
                   why.c_str());
      std::abort();
    }
    if (lossless && *decoded != text) {
      std::fprintf(stderr, "a loaded tokenizer does not round-trip\n");
      std::abort();
    }
  }
  ignore(tokenizer.encode("bad \xff\xfe UTF-8 \xe2\x82", true).takeError());
  if (lossless)
    ignore(tokenizer
               .encodeChat({{"user", "hi"}, {"assistant", "<|eot_id|>"}},
                           /*generationPrompt=*/true)
               .takeError());
}

} // namespace twill::fuzz

#endif // TWILL_FUZZ_TOKENIZERROUNDTRIP_H
