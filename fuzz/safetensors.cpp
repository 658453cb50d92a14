// A .safetensors file: its header checked at open, then every tensor read
// whole and as a block, as a rank reads its slice; every bitsandbytes
// 4-bit weight in it dequantized, at the shape its quant state states.
#include "fuzz/FuzzInput.h"
#include "runtime/io/BitsAndBytes.h"
#include "runtime/io/Safetensors.h"
#include "support/Json.h"

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
  auto checkpoint = SafetensorsCheckpoint::open((*file)->path());
  if (!checkpoint) {
    fuzz::ignore(checkpoint.takeError());
    return 0;
  }
  for (const std::string &name : (*file)->names()) {
    llvm::StringRef stem(name);
    if (!stem.consume_back(kNf4StateSuffix))
      continue;
    // The model's shape, here the one the state says (a model's is
    // bounded: so is this).
    auto bytes = checkpoint->bytes(name);
    if (!bytes) {
      fuzz::ignore(bytes.takeError());
      continue;
    }
    auto state = parseJson(
        llvm::StringRef(reinterpret_cast<const char *>(bytes->data()),
                        bytes->size()),
        name);
    const llvm::json::Object *object = state ? state->getAsObject() : nullptr;
    const llvm::json::Array *dims = object ? object->getArray("shape") : nullptr;
    if (!state)
      fuzz::ignore(state.takeError());
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (size_t i = 0; dims && i < dims->size() && count > 0; ++i) {
      int64_t dim = (*dims)[i].getAsInteger().value_or(-1);
      count = dim >= 0 && dim <= (int64_t(1) << 24) && count <= (int64_t(1) << 24)
                  ? count * dim
                  : -1;
      shape.push_back(dim);
    }
    if (count < 0 || count > (int64_t(1) << 24))
      continue;
    auto values = dequantizeBitsAndBytes4bit(*checkpoint, stem, shape);
    fuzz::valueOrNull(values);
  }
  return 0;
}
