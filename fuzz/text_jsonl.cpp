// Alpaca and chat JSONL: each input read as both (a line holds one form's
// fields or the other's), tokenized with a byte-level vocabulary and Llama
// 3's special tokens in Llama 3's framing and through a chat template,
// trained on the whole conversation or the answers only.
#include "fuzz/FuzzInput.h"
#include "runtime/data/TextDataset.h"
#include "runtime/data/Tokenizer.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::unique_ptr<Tokenizer> tokenizer =
      llvm::cantFail(Tokenizer::loadTiktoken(fuzz::byteTokenizerPath()));
  static ChatFormat formats[] = {
      llvm::cantFail(ChatFormat::llama3(*tokenizer, "bytes")),
      ChatFormat::withTemplate(
          *tokenizer,
          llvm::cantFail(ChatTemplate::parse(
              "{{ bos_token }}{% for m in messages %}<|start_header_id|>"
              "{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}"
              "<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
              "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
              "llama3.jinja")),
          {{"bos_token", "<|begin_of_text|>"}}, "llama3.jinja")};
  std::string path = fuzz::writeFile("train.jsonl", data, size);
  for (const ChatFormat &format : formats)
    for (bool trainOnInput : {false, true}) {
      auto alpaca = readAlpacaJsonl(path, format, trainOnInput);
      fuzz::valueOrNull(alpaca);
      auto chat = readChatJsonl(path, format, trainOnInput);
      fuzz::valueOrNull(chat);
    }
  return 0;
}
