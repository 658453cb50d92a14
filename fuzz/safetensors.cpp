// A .safetensors file: its header checked at open, then every tensor read
// whole and as a block, as a rank reads its slice.
#include "fuzz/FuzzInput.h"
#include "runtime/io/Safetensors.h"

using namespace twill;
using namespace twill::io;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto opened = SafetensorsFile::open(
      fuzz::writeFile("model.safetensors", data, size));
  std::unique_ptr<SafetensorsFile> *file = fuzz::valueOrNull(opened);
  if (!file)
    return 0;
  for (const std::string &name : (*file)->names()) {
    const TensorInfo &tensor = *(*file)->find(name);
    // The header was checked: the data is inside the (at most 1 MB) input.
    std::vector<float> whole(tensor.numElements());
    fuzz::ignore((*file)->readF32(name, tensor.shape, whole));
    // The second half of each dim.
    std::vector<int64_t> offset, extent;
    int64_t count = 1;
    for (int64_t dim : tensor.shape) {
      offset.push_back(dim / 2);
      extent.push_back(dim - dim / 2);
      count *= extent.back();
    }
    std::vector<float> block(count);
    fuzz::ignore((*file)->readBlockF32(name, tensor.shape, offset, extent,
                                       block));
  }
  return 0;
}
