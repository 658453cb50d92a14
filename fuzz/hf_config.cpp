// A Hugging Face config.json imported as the model section.
#include "frontend/config/JobConfig.h"
#include "fuzz/FuzzInput.h"

using namespace twill;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::Expected<ModelConfig> model =
      importHfConfig(fuzz::writeFile("config.json", data, size));
  fuzz::valueOrNull(model);
  return 0;
}
