// A tiktoken .model file (base64 token, space, rank per line); a tokenizer
// it makes encodes and decodes a text with special tokens.
#include "fuzz/FuzzInput.h"
#include "fuzz/TokenizerRoundTrip.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto tokenizer =
      Tokenizer::loadTiktoken(fuzz::writeFile("tokenizer.model", data, size));
  if (std::unique_ptr<Tokenizer> *loaded = fuzz::valueOrNull(tokenizer))
    fuzz::roundTrip(**loaded, /*lossless=*/true);
  return 0;
}
