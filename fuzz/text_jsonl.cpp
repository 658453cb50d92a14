// Alpaca and chat JSONL: each input read as both (a line holds one form's
// fields or the other's), tokenized with a byte-level vocabulary and Llama
// 3's special tokens, trained on the whole conversation or the answers only.
#include "fuzz/FuzzInput.h"
#include "runtime/data/TextDataset.h"
#include "runtime/data/Tokenizer.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<Tokenizer> tokenizer =
      llvm::cantFail(Tokenizer::loadTiktoken(fuzz::byteTokenizerPath()));
  std::string path = fuzz::writeFile("train.jsonl", data, size);
  for (bool trainOnInput : {false, true}) {
    auto alpaca = readAlpacaJsonl(path, *tokenizer, trainOnInput);
    fuzz::valueOrNull(alpaca);
    auto chat = readChatJsonl(path, *tokenizer, trainOnInput);
    fuzz::valueOrNull(chat);
  }
  return 0;
}
