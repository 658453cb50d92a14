// A Hugging Face tokenizer.json; a tokenizer it makes encodes text and
// decodes what it encoded.
#include "fuzz/FuzzInput.h"
#include "fuzz/TokenizerRoundTrip.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto tokenizer = Tokenizer::loadHuggingFace(
      fuzz::writeFile("tokenizer.json", data, size));
  if (std::unique_ptr<Tokenizer> *loaded = fuzz::valueOrNull(tokenizer))
    fuzz::roundTrip(**loaded, /*lossless=*/false);
  return 0;
}
