// model.safetensors.index.json beside two valid shards, each of one tensor
// ("a" and "b", 2 x 3 fp32): the index is opened and every tensor read.
#include "fuzz/FuzzInput.h"
#include "runtime/io/Safetensors.h"

#include <cstring>

using namespace twill;
using namespace twill::io;

static void writeShard(llvm::StringRef file, llvm::StringRef tensor) {
  std::string header = "{\"" + tensor.str() +
                       "\": {\"dtype\": \"F32\", \"shape\": [2, 3], "
                       "\"data_offsets\": [0, 24]}}";
  uint64_t length = header.size();
  std::string bytes(reinterpret_cast<const char *>(&length), 8);
  bytes += header;
  bytes += std::string(24, '\0');
  fuzz::writeFile(file, bytes);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static bool shards = [] {
    writeShard("model-00001-of-00002.safetensors", "a");
    writeShard("model-00002-of-00002.safetensors", "b");
    return true;
  }();
  (void)shards;
  fuzz::writeFile("model.safetensors.index.json", data, size);
  auto checkpoint = SafetensorsCheckpoint::open(fuzz::scratchDir());
  if (SafetensorsCheckpoint *opened = fuzz::valueOrNull(checkpoint)) {
    std::vector<float> values(6);
    for (const char *name : {"a", "b", "c"})
      fuzz::ignore(opened->readF32(name, {2, 3}, values));
  }
  return 0;
}
