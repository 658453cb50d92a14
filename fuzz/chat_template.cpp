// A chat template: one that parses renders a conversation (or refuses it
// with an error), never crashes or hangs.
#include "fuzz/FuzzInput.h"
#include "runtime/data/template/ChatTemplate.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);
  llvm::Expected<ChatTemplate> parsed = ChatTemplate::parse(source, "fuzz");
  if (ChatTemplate *loaded = fuzz::valueOrNull(parsed)) {
    llvm::Expected<std::string> text = loaded->render(
        R"({"messages": [{"role": "system", "content": " be brief "},)"
        R"( {"role": "user", "content": "Hi 🚀"}, {"role": "assistant",)"
        R"( "content": "<think>x</think>ok", "tool_calls": []}],)"
        R"( "bos_token": "<s>", "eos_token": "</s>",)"
        R"( "add_generation_prompt": true})");
    fuzz::valueOrNull(text);
  }
  return 0;
}
