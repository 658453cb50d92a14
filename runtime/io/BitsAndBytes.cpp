//===- BitsAndBytes.cpp - bitsandbytes' 4-bit weights in checkpoints ------===//
//
// Built with -ffp-contract=off: bitsandbytes' arithmetic is reproduced
// operation by operation, each rounded to fp32 as its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/BitsAndBytes.h"

#include "runtime/executable/BFloat16.h"
#include "support/Json.h"
#include "support/Nf4.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

using namespace twill;
using namespace twill::io;

llvm::ArrayRef<float> io::nf4Levels() { return nf4::kLevels; }

llvm::ArrayRef<float> io::dynamicMap() {
  static const nf4::Tables tables = nf4::tables();
  return tables.dynamic;
}

float Nf4Weight::scale(int64_t block) const {
  static const nf4::Tables tables = nf4::tables();
  return nf4::blockScale(tables, absmax[block],
                         nestedAbsmax[block / nestedBlockSize], nestedOffset);
}

static int64_t blocksOf(int64_t count, int64_t blocksize) {
  return (count + blocksize - 1) / blocksize;
}

/// The largest magnitude of `values`.
static float absmaxOf(llvm::ArrayRef<float> values) {
  float most = 0;
  for (float value : values)
    most = std::max(most, std::fabs(value));
  return most;
}

namespace {
/// Eight fp32 lanes: the vector ATen's cpu sum kernel adds with
/// (Vectorized<float> as that kernel is built, measured on AVX2 and
/// AVX-512 machines alike).
using Lanes = std::array<float, 8>;

float plus(float a, float b) { return a + b; }
Lanes plus(Lanes a, const Lanes &b) {
  for (size_t lane = 0; lane < a.size(); ++lane)
    a[lane] += b[lane];
  return a;
}

/// ATen's multi_row_sum: four interleaved rows summed in a cascade of four
/// levels, each level taking the one below every 2^power rows (power at
/// least 4), so that only sums of like size meet.
template <typename T, typename Load>
std::array<T, 4> cascadeRows(Load load, int64_t rows) {
  constexpr int kLevels = 4, kRows = 4;
  int64_t power = std::max<int64_t>(
      4, (rows <= 2 ? 1 : llvm::Log2_64_Ceil(uint64_t(rows))) / kLevels);
  int64_t step = int64_t(1) << power, mask = step - 1;
  T acc[kLevels][kRows] = {};
  int64_t i = 0;
  while (i + step <= rows) {
    for (int64_t j = 0; j < step; ++j, ++i)
      for (int k = 0; k < kRows; ++k)
        acc[0][k] = plus(acc[0][k], load(i * kRows + k));
    for (int level = 1; level < kLevels; ++level) {
      for (int k = 0; k < kRows; ++k) {
        acc[level][k] = plus(acc[level][k], acc[level - 1][k]);
        acc[level - 1][k] = T{};
      }
      if (i & (mask << (level * power)))
        break;
    }
  }
  for (; i < rows; ++i)
    for (int k = 0; k < kRows; ++k)
      acc[0][k] = plus(acc[0][k], load(i * kRows + k));
  for (int level = 1; level < kLevels; ++level)
    for (int k = 0; k < kRows; ++k)
      acc[0][k] = plus(acc[0][k], acc[level][k]);
  return {acc[0][0], acc[0][1], acc[0][2], acc[0][3]};
}

/// ATen's row_sum: `count` items as rows of four, then the rest, then the
/// four partial sums.
template <typename T, typename Load> T cascadeSum(Load load, int64_t count) {
  std::array<T, 4> partial = cascadeRows<T>(load, count / 4);
  for (int64_t i = count / 4 * 4; i < count; ++i)
    partial[0] = plus(partial[0], load(i));
  for (int k = 1; k < 4; ++k)
    partial[0] = plus(partial[0], partial[k]);
  return partial[0];
}
} // namespace

/// torch's fp32 mean of `values` on the cpu, bit for bit where torch sums on
/// one thread (it does below 32,768 values): its sum kernel's cascade over
/// eight-lane vectors, the values past the last whole vector, then the
/// lanes in order; divided by the count in fp32. Over more values on
/// several threads torch sums each thread's share so, then the shares: its
/// mean, and with it bitsandbytes' offset, then follows the thread count.
static float torchMean(llvm::ArrayRef<float> values) {
  int64_t count = values.size();
  constexpr int64_t kWidth = std::tuple_size<Lanes>::value;
  float sum;
  if (count < kWidth) {
    sum = cascadeSum<float>([&](int64_t i) { return values[i]; }, count);
  } else {
    int64_t vectors = count / kWidth;
    Lanes lanes = cascadeSum<Lanes>(
        [&](int64_t i) {
          Lanes vector;
          std::copy_n(values.begin() + i * kWidth, kWidth, vector.begin());
          return vector;
        },
        vectors);
    sum = 0;
    for (int64_t i = vectors * kWidth; i < count; ++i)
      sum += values[i];
    for (float lane : lanes)
      sum += lane;
  }
  return sum / float(count);
}

std::vector<float> io::blockAbsmax(llvm::ArrayRef<float> values,
                                   int64_t blockSize) {
  int64_t count = values.size(), blocks = blocksOf(count, blockSize);
  std::vector<float> absmax(blocks);
  for (int64_t block = 0; block < blocks; ++block) {
    int64_t first = block * blockSize;
    absmax[block] =
        absmaxOf(values.slice(first, std::min(blockSize, count - first)));
  }
  return absmax;
}

/// bitsandbytes' cpu quantize_blockwise with the dynamic map: each value
/// times its block's 1 / absmax, to [0, 65535] in fp32, then the nearest
/// entry of the map by a table of 65536 bins (the table's, not the exact
/// nearest: a value within a bin of a midpoint takes the bin's entry).
static void quantizeBlockwise(llvm::ArrayRef<float> values, int64_t blockSize,
                              std::vector<uint8_t> &codes,
                              std::vector<float> &absmax) {
  constexpr int kBins = 65536;
  static const std::vector<uint8_t> table = [] {
    llvm::ArrayRef<float> map = dynamicMap();
    std::vector<uint8_t> nearest(kBins);
    float midpoints[255];
    for (int i = 0; i < 255; ++i)
      midpoints[i] = 0.5f * (map[i] + map[i + 1]);
    int code = 0;
    for (int bin = 0; bin < kBins; ++bin) {
      float value = -1.0f + (2.0f * float(bin)) / float(kBins - 1);
      while (code < 255 && midpoints[code] < value)
        ++code;
      nearest[bin] = uint8_t(code);
    }
    return nearest;
  }();
  int64_t count = values.size();
  codes.assign(count, 0);
  absmax = blockAbsmax(values, blockSize);
  for (int64_t block = 0; block < int64_t(absmax.size()); ++block) {
    int64_t first = block * blockSize,
            length = std::min(blockSize, count - first);
    float most = absmax[block];
    if (most == 0.0f)
      continue;
    float inverse = 1.0f / most;
    for (int64_t i = first; i < first + length; ++i) {
      float scaled = std::clamp(values[i] * inverse, -1.0f, 1.0f);
      float shifted = scaled + 1.0f;
      float half = shifted * 0.5f;
      float bin = half * float(kBins - 1);
      codes[i] = table[uint16_t(bin + 0.5f)];
    }
  }
}

void io::nf4Codes(llvm::ArrayRef<float> values, llvm::ArrayRef<float> absmax,
                  int64_t blockSize, llvm::MutableArrayRef<uint8_t> codes) {
  // bitsandbytes' default (torch) quantize_4bit, which its cpu backend
  // runs: each value times 1 / absmax (absmax at least 1e-38), clamped, and
  // coded by the number of midpoints between levels below it.
  llvm::ArrayRef<float> levels = nf4Levels();
  float midpoints[15];
  for (int i = 0; i < 15; ++i)
    midpoints[i] = (levels[i] + levels[i + 1]) / 2;
  std::fill(codes.begin(), codes.end(), 0);
  int64_t count = values.size();
  for (int64_t block = 0; block * blockSize < count; ++block) {
    int64_t first = block * blockSize, end = std::min(count, first + blockSize);
    float most = absmax[block], inverse = 1.0f / std::max(most, 1e-38f);
    for (int64_t i = first; i < end; ++i) {
      // An all-zero block: every value 0, which codes as 0 does.
      float scaled =
          most == 0.0f ? 0.0f : std::clamp(values[i] * inverse, -1.0f, 1.0f);
      uint8_t code = uint8_t(
          std::lower_bound(midpoints, midpoints + 15, scaled) - midpoints);
      codes[i / 2] |= i % 2 ? code : uint8_t(code << 4);
    }
  }
}

void io::quantizeNf4Scales(llvm::ArrayRef<float> absmax, Nf4Weight &weight) {
  // The absmaxes less their mean, coded blockwise.
  weight.nestedOffset = torchMean(absmax);
  std::vector<float> centred(absmax.size());
  for (size_t block = 0; block < absmax.size(); ++block)
    centred[block] = absmax[block] - weight.nestedOffset;
  quantizeBlockwise(centred, weight.nestedBlockSize, weight.absmax,
                    weight.nestedAbsmax);
}

Nf4Weight io::quantizeNf4(llvm::ArrayRef<float> values, int64_t blockSize,
                          int64_t nestedBlockSize) {
  Nf4Weight weight;
  weight.blockSize = blockSize;
  weight.nestedBlockSize = nestedBlockSize;
  std::vector<float> absmax = blockAbsmax(values, blockSize);
  weight.codes.resize((values.size() + 1) / 2);
  nf4Codes(values, absmax, blockSize, weight.codes);
  quantizeNf4Scales(absmax, weight);
  return weight;
}

void io::dequantizeNf4(const Nf4Weight &weight,
                       llvm::MutableArrayRef<float> values) {
  llvm::ArrayRef<float> levels = nf4Levels();
  int64_t count = values.size();
  for (int64_t block = 0; block * weight.blockSize < count; ++block) {
    float scale = weight.scale(block);
    int64_t first = block * weight.blockSize,
            end = std::min(count, first + weight.blockSize);
    for (int64_t i = first; i < end; ++i)
      values[i] = levels[nf4::codeAt(weight.codes.data(), i)] * scale;
  }
}

bool io::isBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                            llvm::StringRef name) {
  return checkpoint.contains((name + kNf4StateSuffix).str()) ||
         checkpoint.contains((name + kFp4StateSuffix).str());
}

std::optional<llvm::StringRef> io::fourBitWeightOf(llvm::StringRef name) {
  static constexpr llvm::StringLiteral parts[] = {
      ".absmax",           ".quant_map",    ".nested_absmax",
      ".nested_quant_map", kNf4StateSuffix, kFp4StateSuffix};
  for (llvm::StringRef part : parts)
    if (name.ends_with(part))
      return name.drop_back(part.size());
  return std::nullopt;
}

namespace {
/// What `W.quant_state.bitsandbytes__nf4` says.
struct QuantState {
  int64_t blocksize = 0, nestedBlocksize = 0;
  std::string dtype;
  std::vector<int64_t> shape;
  std::optional<float> nestedOffset; // with double quantization
};

/// A 4-bit weight as stored: its state, its codes, its levels and its
/// blocks' scales, as F32 values or (double quantization) as a Nf4Weight's
/// codes and nested scales.
struct Stored4bit {
  QuantState state;
  std::vector<float> levels, absmax, nestedMap;
  Nf4Weight nested; // with double quantization: codes, absmax, nested
  llvm::ArrayRef<uint8_t> codes;
};
} // namespace

/// An error of 4-bit weight `name`, naming its file.
static llvm::Error fourBitError(const SafetensorsCheckpoint &checkpoint,
                                llvm::StringRef name, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 checkpoint.fileOf(name) + ": 4-bit weight '" +
                                     name + "': " + what);
}

/// Part `part` of 4-bit weight `name`, F32 of `count` values, read whole
/// and finite: a nan in a scale or a map is every value of its blocks nan,
/// found only once training has begun.
static llvm::Expected<std::vector<float>>
readFloats(const SafetensorsCheckpoint &checkpoint, llvm::StringRef name,
           const std::string &part, int64_t count) {
  std::vector<float> values(count);
  if (llvm::Error error = checkpoint.readF32(part, {count}, values))
    return std::move(error);
  auto bad =
      llvm::find_if(values, [](float value) { return !std::isfinite(value); });
  if (bad != values.end())
    return fourBitError(
        checkpoint, name,
        llvm::formatv("'{0}' holds {1} at element {2}: a checkpoint must hold "
                      "finite numbers",
                      part, *bad, bad - values.begin()));
  return values;
}

/// What `stateName`'s JSON `object`, the quant state of 4-bit weight
/// `name`, says: each field named where absent or unsound, for read as
/// absent (or as 0) a field turned the weight into another layout, or
/// into nan at the first step. Double quantization is where the
/// checkpoint holds `W.nested_absmax`, as bitsandbytes decides.
static llvm::Expected<QuantState>
readQuantState(const SafetensorsCheckpoint &checkpoint, llvm::StringRef name,
               const std::string &stateName, const llvm::json::Object &object) {
  std::string nestedName = (name + ".nested_absmax").str(),
              where = "its quant state '" + stateName + "'";
  bool nested = checkpoint.contains(nestedName);
  auto fail = [&](const llvm::Twine &what) {
    return fourBitError(checkpoint, name, where + what);
  };
  // Field `key` (one double quantization needs, where `nesting`).
  auto field = [&](llvm::StringRef key,
                   bool nesting) -> llvm::Expected<const llvm::json::Value *> {
    if (const llvm::json::Value *value = object.get(key))
      return value;
    return fail(" has no " + key +
                (nesting
                     ? ", which double quantization (" + nestedName + ") needs"
                     : ""));
  };
  auto size = [&](llvm::StringRef key,
                  bool nesting) -> llvm::Expected<int64_t> {
    llvm::Expected<const llvm::json::Value *> value = field(key, nesting);
    if (!value)
      return value.takeError();
    std::optional<int64_t> size = (*value)->getAsInteger();
    if (!size || *size <= 0 || *size > (int64_t(1) << 20))
      return fail(llvm::formatv(": {0} must be a positive size, at most "
                                "1048576, got {1}",
                                key, **value));
    return *size;
  };

  QuantState state;
  llvm::Expected<int64_t> blocksize = size("blocksize", false);
  if (!blocksize)
    return blocksize.takeError();
  state.blocksize = *blocksize;
  state.dtype = object.getString("dtype").value_or("").str();
  if (const llvm::json::Array *dims = object.getArray("shape"))
    for (const llvm::json::Value &dim : *dims)
      state.shape.push_back(dim.getAsInteger().value_or(-1));
  if (!nested) {
    if (object.get("nested_offset"))
      return fail(" has a nested_offset (double quantization), but the "
                  "checkpoint has no '" + nestedName + "'");
    return state;
  }
  llvm::Expected<int64_t> nestedBlocksize = size("nested_blocksize", true);
  if (!nestedBlocksize)
    return nestedBlocksize.takeError();
  state.nestedBlocksize = *nestedBlocksize;
  // The scales' scales are float32 wherever bitsandbytes quantizes (its
  // absmax is); another dtype would dequantize them rounded to it.
  llvm::Expected<const llvm::json::Value *> nestedDtype =
      field("nested_dtype", true);
  if (!nestedDtype)
    return nestedDtype.takeError();
  if ((*nestedDtype)->getAsString() != "float32")
    return fail(llvm::formatv(": nested_dtype is {0}; bitsandbytes codes its "
                              "scales' scales as float32",
                              **nestedDtype));
  llvm::Expected<const llvm::json::Value *> offset =
      field("nested_offset", true);
  if (!offset)
    return offset.takeError();
  std::optional<double> number = (*offset)->getAsNumber();
  if (!number)
    return fail(
        llvm::formatv(": nested_offset must be a number, got {0}", **offset));
  state.nestedOffset = float(*number);
  if (!std::isfinite(*state.nestedOffset))
    return fail(llvm::formatv(": nested_offset is {0}, not a finite number",
                              *state.nestedOffset));
  return state;
}

static std::string dimText(int64_t dim) { return std::to_string(dim); }

static llvm::Expected<Stored4bit>
readStored4bit(const SafetensorsCheckpoint &checkpoint, llvm::StringRef name,
               llvm::ArrayRef<int64_t> shape) {
  auto fail = [&](const llvm::Twine &what) {
    return fourBitError(checkpoint, name, what);
  };
  std::string stem = name.str(), stateName = (name + kNf4StateSuffix).str();
  // A 4-bit weight (isBitsAndBytes4bit) without NF4's state is FP4's.
  if (!checkpoint.contains(stateName))
    return fail("it is FP4 (bnb_4bit_quant_type \"fp4\"); only NF4 "
                "(\"nf4\") is read");
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
  if (!object)
    return fail("its quant state '" + stateName + "' is no JSON object");
  if (object->getString("quant_type") != "nf4")
    return fail(llvm::formatv("its quant state '{0}' has quant_type {1}, not "
                              "\"nf4\"",
                              stateName,
                              object->get("quant_type")
                                  ? *object->get("quant_type")
                                  : llvm::json::Value("(none)")));
  llvm::Expected<QuantState> read =
      readQuantState(checkpoint, name, stateName, *object);
  if (!read)
    return read.takeError();
  Stored4bit stored;
  QuantState &state = stored.state = std::move(*read);
  if (llvm::ArrayRef<int64_t>(state.shape) != shape)
    return fail(llvm::formatv("its quant state's shape is [{0}], the model's "
                              "[{1}]",
                              llvm::join(llvm::map_range(state.shape,
                                                         dimText),
                                         ", "),
                              llvm::join(llvm::map_range(shape, dimText),
                                         ", ")));
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;

  llvm::Expected<llvm::ArrayRef<uint8_t>> codes = checkpoint.bytes(stem);
  if (!codes)
    return codes.takeError();
  if (int64_t(codes->size()) != (count + 1) / 2)
    return fail(llvm::formatv("it holds {0} bytes of codes for {1} values, "
                              "which take {2} (two a byte)",
                              codes->size(), count, (count + 1) / 2));
  stored.codes = *codes;
  llvm::Expected<std::vector<float>> levels =
      readFloats(checkpoint, name, stem + ".quant_map", 16);
  if (!levels)
    return levels.takeError();
  stored.levels = std::move(*levels);

  // Each block's scale: stored, or its 8-bit code and nested scales.
  int64_t blocks = blocksOf(count, state.blocksize);
  if (!state.nestedOffset) {
    llvm::Expected<std::vector<float>> absmax =
        readFloats(checkpoint, name, stem + ".absmax", blocks);
    if (!absmax)
      return absmax.takeError();
    stored.absmax = std::move(*absmax);
    return stored;
  }
  llvm::Expected<llvm::ArrayRef<uint8_t>> scaleCodes =
      checkpoint.bytes(stem + ".absmax");
  if (!scaleCodes)
    return scaleCodes.takeError();
  if (int64_t(scaleCodes->size()) != blocks)
    return fail(llvm::formatv("'{0}.absmax' holds {1} codes for its {2} "
                              "blocks of {3}",
                              stem, scaleCodes->size(), blocks,
                              state.blocksize));
  llvm::Expected<std::vector<float>> map =
      readFloats(checkpoint, name, stem + ".nested_quant_map", 256);
  if (!map)
    return map.takeError();
  llvm::Expected<std::vector<float>> nested =
      readFloats(checkpoint, name, stem + ".nested_absmax",
                 blocksOf(blocks, state.nestedBlocksize));
  if (!nested)
    return nested.takeError();
  stored.nestedMap = std::move(*map);
  Nf4Weight &weight = stored.nested;
  weight.blockSize = state.blocksize;
  weight.nestedBlockSize = state.nestedBlocksize;
  weight.absmax.assign(scaleCodes->begin(), scaleCodes->end());
  weight.nestedAbsmax = std::move(*nested);
  weight.nestedOffset = *state.nestedOffset;
  // By its own map: a product and a sum, as bitsandbytes dequantizes;
  // finite parts may still overflow.
  stored.absmax.resize(blocks);
  for (int64_t block = 0; block < blocks; ++block) {
    float product = stored.nestedMap[weight.absmax[block]] *
                    weight.nestedAbsmax[block / weight.nestedBlockSize];
    stored.absmax[block] = product + weight.nestedOffset;
    if (!std::isfinite(stored.absmax[block]))
      return fail(llvm::formatv("block {0}'s scale (nested_quant_map times "
                                "nested_absmax plus nested_offset) is {1}",
                                block, stored.absmax[block]));
  }
  return stored;
}

llvm::Expected<Nf4Weight>
io::readBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                         llvm::StringRef name, llvm::ArrayRef<int64_t> shape) {
  llvm::Expected<Stored4bit> stored = readStored4bit(checkpoint, name, shape);
  if (!stored)
    return stored.takeError();
  auto fail = [&](const llvm::Twine &what) {
    return fourBitError(checkpoint, name, what);
  };
  if (!stored->state.nestedOffset)
    return fail("its scales are not double-quantized "
                "(bnb_4bit_use_double_quant), as a quantized base holds them");
  if (!llvm::equal(stored->levels, nf4Levels()))
    return fail("its quant_map is not the NF4 levels");
  if (!llvm::equal(stored->nestedMap, dynamicMap()))
    return fail("its nested_quant_map is not bitsandbytes' signed dynamic "
                "map");
  Nf4Weight weight = std::move(stored->nested);
  weight.codes.assign(stored->codes.begin(), stored->codes.end());
  return weight;
}

llvm::Expected<std::vector<float>>
io::dequantizeBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                               llvm::StringRef name,
                               llvm::ArrayRef<int64_t> shape) {
  llvm::Expected<Stored4bit> stored = readStored4bit(checkpoint, name, shape);
  if (!stored)
    return stored.takeError();
  const QuantState &state = stored->state;
  // Level times scale in fp32, rounded to the weight's own dtype: one loop
  // per rounding, none chosen per value.
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  std::vector<float> values(count);
  auto dequantize = [&](auto round) {
    for (int64_t i = 0; i < count; ++i) {
      uint8_t code = nf4::codeAt(stored->codes.data(), i);
      values[i] =
          round(stored->levels[code] * stored->absmax[i / state.blocksize]);
    }
  };
  if (state.dtype == "bfloat16")
    dequantize([](float value) { return bf16ToFloat(floatToBF16(value)); });
  else if (state.dtype == "float16")
    dequantize([](float value) { return float(_Float16(value)); });
  else if (state.dtype == "float32")
    dequantize([](float value) { return value; });
  else
    return fourBitError(checkpoint, name,
                        "its quant state's dtype '" + state.dtype +
                            "' is none of bfloat16, float16, float32");
  return values;
}
