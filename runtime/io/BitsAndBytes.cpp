//===- BitsAndBytes.cpp - bitsandbytes' 4-bit weights in checkpoints ------===//

#include "runtime/io/BitsAndBytes.h"

#include "runtime/executable/BFloat16.h"
#include "support/Json.h"

#include "llvm/Support/FormatVariadic.h"

using namespace twill;
using namespace twill::io;

bool io::isBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                            llvm::StringRef name) {
  return checkpoint.contains((name + kNf4StateSuffix).str()) ||
         checkpoint.contains((name + ".quant_state.bitsandbytes__fp4").str());
}

namespace {
/// What `W.quant_state.bitsandbytes__nf4` says.
struct QuantState {
  int64_t blocksize = 0, nestedBlocksize = 0;
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<float> nestedOffset; // with double quantization
};
} // namespace

static int64_t blocksOf(int64_t count, int64_t blocksize) {
  return (count + blocksize - 1) / blocksize;
}

/// An F32 tensor of `count` values, read whole.
static llvm::Expected<std::vector<float>>
readFloats(const SafetensorsCheckpoint &checkpoint, const std::string &name,
           int64_t count) {
  std::vector<float> values(count);
  if (llvm::Error error = checkpoint.readF32(name, {count}, values))
    return std::move(error);
  return values;
}

llvm::Expected<std::vector<float>>
io::dequantizeBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                               llvm::StringRef name,
                               llvm::ArrayRef<int64_t> shape) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        checkpoint.fileOf(name) + ": 4-bit weight '" + name + "': " + what);
  };
  std::string stem = name.str(), stateName = (name + kNf4StateSuffix).str();
  if (!checkpoint.contains(stateName))
    return fail("FP4 is not read, only NF4 (bnb_4bit_quant_type \"nf4\")");
  llvm::Expected<llvm::ArrayRef<uint8_t>> stateBytes =
      checkpoint.bytes(stateName);
  if (!stateBytes)
    return stateBytes.takeError();
  llvm::Expected<llvm::json::Value> parsed = parseJson(
      llvm::StringRef(reinterpret_cast<const char *>(stateBytes->data()),
                      stateBytes->size()),
      stateName);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *object = parsed->getAsObject();
  QuantState state;
  if (object) {
    state.blocksize = object->getInteger("blocksize").value_or(0);
    state.nestedBlocksize = object->getInteger("nested_blocksize").value_or(0);
    state.dtype = object->getString("dtype").value_or("").str();
    if (std::optional<double> offset = object->getNumber("nested_offset"))
      state.nestedOffset = float(*offset);
    if (const llvm::json::Array *dims = object->getArray("shape"))
      for (const llvm::json::Value &dim : *dims)
        state.shape.push_back(dim.getAsInteger().value_or(-1));
  }
  if (!object || object->getString("quant_type") != "nf4")
    return fail("its quant state is not an NF4 one");
  if (llvm::ArrayRef<int64_t>(state.shape) != shape)
    return fail("its quant state's shape is not the model's");
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  if (state.blocksize <= 0 || state.blocksize > (int64_t(1) << 20) ||
      (state.nestedOffset &&
       (state.nestedBlocksize <= 0 || state.nestedBlocksize > 1 << 20)))
    return fail("its blocksize or nested_blocksize is not a positive size");

  llvm::Expected<llvm::ArrayRef<uint8_t>> codes = checkpoint.bytes(stem);
  if (!codes)
    return codes.takeError();
  if (int64_t(codes->size()) != (count + 1) / 2)
    return fail(llvm::formatv("{0} bytes of codes for {1} values",
                              codes->size(), count));
  llvm::Expected<std::vector<float>> levels =
      readFloats(checkpoint, stem + ".quant_map", 16);
  if (!levels)
    return levels.takeError();

  // Each block's scale: stored, or dequantized from its 8-bit code.
  int64_t blocks = blocksOf(count, state.blocksize);
  std::vector<float> absmax;
  if (!state.nestedOffset) {
    llvm::Expected<std::vector<float>> stored =
        readFloats(checkpoint, stem + ".absmax", blocks);
    if (!stored)
      return stored.takeError();
    absmax = std::move(*stored);
  } else {
    llvm::Expected<llvm::ArrayRef<uint8_t>> scaleCodes =
        checkpoint.bytes(stem + ".absmax");
    if (!scaleCodes)
      return scaleCodes.takeError();
    if (int64_t(scaleCodes->size()) != blocks)
      return fail(llvm::formatv("{0} absmax codes for {1} blocks",
                                scaleCodes->size(), blocks));
    llvm::Expected<std::vector<float>> map =
        readFloats(checkpoint, stem + ".nested_quant_map", 256);
    if (!map)
      return map.takeError();
    llvm::Expected<std::vector<float>> nested =
        readFloats(checkpoint, stem + ".nested_absmax",
                   blocksOf(blocks, state.nestedBlocksize));
    if (!nested)
      return nested.takeError();
    absmax.resize(blocks);
    for (int64_t block = 0; block < blocks; ++block)
      absmax[block] = (*map)[(*scaleCodes)[block]] *
                          (*nested)[block / state.nestedBlocksize] +
                      *state.nestedOffset;
  }

  // Level times scale in fp32, rounded to the weight's own dtype: one loop
  // per rounding, none chosen per value.
  std::vector<float> values(count);
  auto dequantize = [&](auto round) {
    for (int64_t i = 0; i < count; ++i) {
      uint8_t pair = (*codes)[i / 2];
      uint8_t code = i % 2 ? pair & 0xf : pair >> 4;
      values[i] = round((*levels)[code] * absmax[i / state.blocksize]);
    }
  };
  if (state.dtype == "bfloat16")
    dequantize([](float value) { return bf16ToFloat(floatToBF16(value)); });
  else if (state.dtype == "float16")
    dequantize([](float value) { return float(_Float16(value)); });
  else if (state.dtype == "float32")
    dequantize([](float value) { return value; });
  else
    return fail("its quant state's dtype '" + state.dtype +
                "' is none of bfloat16, float16, float32");
  return values;
}
