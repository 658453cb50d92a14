//===- Safetensors.cpp - Hugging Face safetensors files -------------------===//

#include "runtime/io/Safetensors.h"
#include "runtime/io/BitsAndBytes.h"

#include "support/AtomicFile.h"
#include "runtime/executable/BFloat16.h"
#include "support/Json.h"
#include "support/ReadFile.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace twill::io;
namespace json = llvm::json;

static llvm::Error fileError(llvm::StringRef path, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + what);
}

static std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ", ") +
         "]";
}

static std::optional<DType> parseDType(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<DType>>(name)
      .Case("F32", DType::F32)
      .Case("F16", DType::F16)
      .Case("BF16", DType::BF16)
      .Case("U8", DType::U8)
      .Default(std::nullopt);
}

static uint64_t bytesPerElement(DType dtype) {
  return dtype == DType::F32 ? 4 : dtype == DType::U8 ? 1 : 2;
}

int64_t TensorInfo::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

/// IEEE half to single precision, subnormals, infinities and NaNs included.
static float halfToFloat(uint16_t half) {
  uint32_t sign = uint32_t(half & 0x8000) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise the mantissa.
    exponent = 113;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// Parses one header entry, checking it against the data section's size.
static llvm::Expected<TensorInfo> parseEntry(llvm::StringRef path,
                                             llvm::StringRef name,
                                             const json::Value &value,
                                             uint64_t dataSize) {
  auto bad = [&](const llvm::Twine &what) {
    return fileError(path, "tensor '" + name + "': " + what);
  };
  const json::Object *entry = value.getAsObject();
  if (!entry)
    return bad("header entry is not an object");
  std::optional<llvm::StringRef> dtypeName = entry->getString("dtype");
  if (!dtypeName)
    return bad("header entry has no dtype");
  std::optional<DType> dtype = parseDType(*dtypeName);
  if (!dtype)
    return bad("dtype " + *dtypeName +
               " is not supported; Twill reads F32, "
               "F16 and BF16");
  TensorInfo info{*dtype, {}, 0, 0};
  const json::Array *shape = entry->getArray("shape");
  if (!shape)
    return bad("header entry has no shape");
  for (const json::Value &dim : *shape) {
    std::optional<int64_t> size = dim.getAsInteger();
    if (!size || *size < 0)
      return bad("shape holds a non-size value");
    info.shape.push_back(*size);
  }
  const json::Array *offsets = entry->getArray("data_offsets");
  std::optional<int64_t> begin, end;
  if (offsets && offsets->size() == 2) {
    begin = (*offsets)[0].getAsInteger();
    end = (*offsets)[1].getAsInteger();
  }
  if (!begin || !end || *begin < 0 || *end < *begin)
    return bad("data_offsets must be [begin, end] with begin <= end");
  info.begin = *begin;
  info.end = *end;
  if (info.end > dataSize)
    return bad(llvm::formatv("data_offsets [{0}, {1}] run past the {2} data "
                             "bytes of the file (truncated?)",
                             info.begin, info.end, dataSize));
  // Sizes that overflow 64 bits are no size: no file holds them.
  uint64_t expected = bytesPerElement(info.dtype);
  for (int64_t dim : info.shape)
    if (__builtin_mul_overflow(expected, uint64_t(dim), &expected))
      return bad("shape " + shapeText(info.shape) +
                 " has more elements than any file holds");
  if (info.end - info.begin != expected)
    return bad(llvm::formatv("{0} {1} needs {2} bytes, data_offsets give {3}",
                             *dtypeName, shapeText(info.shape), expected,
                             info.end - info.begin));
  return info;
}

llvm::Expected<std::unique_ptr<SafetensorsFile>>
SafetensorsFile::open(llvm::StringRef path) {
  if (existsButIsNotRegular(path))
    return fileError(path, llvm::Twine("cannot open: ") + kNotRegularFile);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fileError(path, "cannot open: " + buffer.getError().message());
  auto file = std::unique_ptr<SafetensorsFile>(new SafetensorsFile());
  file->filePath = path.str();
  file->buffer = std::move(*buffer);

  llvm::StringRef bytes = file->buffer->getBuffer();
  if (bytes.size() < 8)
    return fileError(path, llvm::formatv("only {0} bytes: not a safetensors "
                                         "file (truncated?)",
                                         bytes.size()));
  uint64_t headerSize =
      llvm::support::endian::read64le(bytes.data()); // the format is LE
  if (headerSize > bytes.size() - 8)
    return fileError(path, llvm::formatv("header size {0} exceeds the file's "
                                         "{1} bytes: truncated or not a "
                                         "safetensors file",
                                         headerSize, bytes.size()));
  llvm::Expected<json::Value> header =
      parseJson(bytes.substr(8, headerSize), path + ": corrupt header");
  if (!header)
    return header.takeError();
  const json::Object *entries = header->getAsObject();
  if (!entries)
    return fileError(path, "corrupt header: not a JSON object");

  file->data = bytes.data() + 8 + headerSize;
  uint64_t dataSize = bytes.size() - 8 - headerSize;
  for (const auto &[key, value] : *entries) {
    if (key == "__metadata__")
      continue;
    llvm::Expected<TensorInfo> info = parseEntry(path, key, value, dataSize);
    if (!info)
      return info.takeError();
    file->tensors[key] = std::move(*info);
  }
  // Tensors own disjoint bytes (as the safetensors library insists): one
  // tensor's write would otherwise be another's value.
  std::vector<std::pair<const TensorInfo *, llvm::StringRef>> byOffset;
  for (const auto &entry : file->tensors)
    if (entry.second.end > entry.second.begin)
      byOffset.push_back({&entry.second, entry.getKey()});
  llvm::sort(byOffset, [](const auto &a, const auto &b) {
    return a.first->begin < b.first->begin;
  });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i].first->begin < byOffset[i - 1].first->end)
      return fileError(path, llvm::formatv("tensors '{0}' and '{1}' overlap "
                                           "in the data (data_offsets [{2}, "
                                           "{3}] and [{4}, {5}])",
                                           byOffset[i - 1].second,
                                           byOffset[i].second,
                                           byOffset[i - 1].first->begin,
                                           byOffset[i - 1].first->end,
                                           byOffset[i].first->begin,
                                           byOffset[i].first->end));
  return file;
}

const TensorInfo *SafetensorsFile::find(llvm::StringRef name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> result;
  for (const auto &entry : tensors)
    result.push_back(entry.getKey().str());
  llvm::sort(result);
  return result;
}

/// Widens `count` stored values at `source` to fp32.
static void convertToF32(DType dtype, const char *source, float *out,
                         int64_t count) {
  if (dtype == DType::F32) {
    std::memcpy(out, source, count * sizeof(float));
    return;
  }
  auto convert = dtype == DType::F16 ? halfToFloat : twill::bf16ToFloat;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t raw;
    std::memcpy(&raw, source + 2 * i, sizeof(raw));
    out[i] = convert(raw);
  }
}

/// Widens the block of a row-major tensor of `shape` at `source` from
/// `offset`, `extent` long in each dim (checked inside it), into `out`.
void twill::io::copyBlock(DType dtype, const char *source,
                          llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> offset,
                          llvm::ArrayRef<int64_t> extent,
                          llvm::MutableArrayRef<float> out) {
  int64_t rank = shape.size();
  uint64_t element = bytesPerElement(dtype);
  if (rank == 0) {
    convertToF32(dtype, source, out.data(), 1);
    return;
  }
  // One contiguous run of the last dim per index of the leading dims.
  int64_t run = extent.back(), runs = run ? int64_t(out.size()) / run : 0;
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t start = 0;
    for (int64_t d = 0; d < rank; ++d)
      start = start * shape[d] + offset[d] + (d + 1 < rank ? index[d] : 0);
    convertToF32(dtype, source + start * element, out.data() + r * run, run);
    for (int64_t d = rank - 2; d >= 0 && ++index[d] == extent[d]; --d)
      index[d] = 0;
  }
}

llvm::Error twill::io::checkBlock(llvm::StringRef path, llvm::StringRef name,
                                  llvm::ArrayRef<int64_t> stored,
                                  llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> offset,
                                  llvm::ArrayRef<int64_t> extent,
                                  size_t outSize) {
  if (stored != shape)
    return fileError(path, "tensor '" + name + "' has shape " +
                               shapeText(stored) + ", expected " +
                               shapeText(shape));
  int64_t rank = shape.size(), count = 1;
  bool inside =
      (int64_t)offset.size() == rank && (int64_t)extent.size() == rank;
  for (int64_t d = 0; inside && d < rank; ++d) {
    inside =
        offset[d] >= 0 && extent[d] >= 0 && offset[d] + extent[d] <= shape[d];
    count *= extent[d];
  }
  if (!inside)
    return fileError(path,
                     llvm::formatv("tensor '{0}': the block at {1} of {2} is "
                                   "outside {3}",
                                   name, shapeText(offset), shapeText(extent),
                                   shapeText(shape)));
  if ((int64_t)outSize != count)
    return fileError(path, llvm::formatv("tensor '{0}': destination holds "
                                         "{1} values, not {2}",
                                         name, outSize, count));
  return llvm::Error::success();
}

llvm::Error SafetensorsFile::readF32(llvm::StringRef name,
                                     llvm::ArrayRef<int64_t> shape,
                                     llvm::MutableArrayRef<float> out) const {
  return readBlockF32(name, shape, std::vector<int64_t>(shape.size(), 0),
                      shape, out);
}

llvm::Error SafetensorsFile::readBlockF32(
    llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
    llvm::ArrayRef<int64_t> offset, llvm::ArrayRef<int64_t> extent,
    llvm::MutableArrayRef<float> out) const {
  const TensorInfo *info = find(name);
  if (!info)
    return fileError(filePath, "no tensor named '" + name + "'");
  return readBlockF32As(*info, name, info->shape, shape, offset, extent, out);
}

llvm::Error SafetensorsFile::readBlockF32As(
    const TensorInfo &tensor, llvm::StringRef name,
    llvm::ArrayRef<int64_t> stored, llvm::ArrayRef<int64_t> shape,
    llvm::ArrayRef<int64_t> offset, llvm::ArrayRef<int64_t> extent,
    llvm::MutableArrayRef<float> out) const {
  const TensorInfo *info = &tensor;
  if (llvm::Error error =
          checkBlock(filePath, name, stored, shape, offset, extent, out.size()))
    return error;
  if (info->dtype == DType::U8)
    return fileError(filePath,
                     "tensor '" + name +
                         "' is U8: quantized weights are read as "
                         "bitsandbytes' 4-bit ones (with their quant state), "
                         "no others");
  copyBlock(info->dtype, data + info->begin, shape, offset, extent, out);
  dataBytesRead += out.size() * bytesPerElement(info->dtype);
  return llvm::Error::success();
}

/// A tensor's `shape` seen as its rows: [every dim but the last, the last].
static std::vector<int64_t> rowsView(llvm::ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  return {rows, shape.empty() ? 1 : shape.back()};
}

llvm::Error
SafetensorsFile::readRowsF32(llvm::StringRef name, int64_t firstRow,
                             int64_t rows, int64_t firstColumn, int64_t width,
                             llvm::MutableArrayRef<float> out) const {
  const TensorInfo *info = find(name);
  if (!info)
    return fileError(filePath, "no tensor named '" + name + "'");
  // Row-major: the rows of the flattened dims are the tensor's bytes as
  // they lie.
  std::vector<int64_t> view = rowsView(info->shape);
  return readBlockF32As(*info, name, view, view, {firstRow, firstColumn},
                        {rows, width}, out);
}

llvm::Expected<llvm::ArrayRef<uint8_t>>
SafetensorsFile::bytes(llvm::StringRef name) const {
  const TensorInfo *info = find(name);
  if (!info)
    return fileError(filePath, "no tensor named '" + name + "'");
  if (info->dtype != DType::U8)
    return fileError(filePath, "tensor '" + name + "' is not U8");
  dataBytesRead += info->end - info->begin;
  return llvm::ArrayRef<uint8_t>(
      reinterpret_cast<const uint8_t *>(data + info->begin),
      info->end - info->begin);
}

std::pair<int64_t, int64_t> twill::io::shardRange(int64_t size, int64_t parts,
                                                  int64_t index) {
  int64_t block = (size + parts - 1) / parts;
  int64_t begin = std::min(size, index * block);
  return {begin, std::min(size, begin + block) - begin};
}

//===----------------------------------------------------------------------===//
// SafetensorsCheckpoint
//===----------------------------------------------------------------------===//

llvm::Expected<SafetensorsCheckpoint>
SafetensorsCheckpoint::open(llvm::StringRef path) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.description = path.str();
  auto addFile =
      [&](llvm::StringRef file) -> llvm::Expected<const SafetensorsFile *> {
    llvm::Expected<std::unique_ptr<SafetensorsFile>> opened =
        SafetensorsFile::open(file);
    if (!opened)
      return opened.takeError();
    checkpoint.files.push_back(std::move(*opened));
    return checkpoint.files.back().get();
  };
  auto ownAll = [&](const SafetensorsFile *file) {
    for (const std::string &name : file->names())
      checkpoint.owner[name] = file;
  };

  if (!llvm::sys::fs::is_directory(path)) {
    llvm::Expected<const SafetensorsFile *> file = addFile(path);
    if (!file)
      return file.takeError();
    ownAll(*file);
    return checkpoint;
  }

  llvm::SmallString<256> index(path), single(path);
  llvm::sys::path::append(index, "model.safetensors.index.json");
  llvm::sys::path::append(single, "model.safetensors");
  // Whether a file is there; a path that cannot be looked at (a symlink
  // loop, no permission) is an error of its own, not an absent file.
  auto present = [](llvm::StringRef file) -> llvm::Expected<bool> {
    llvm::sys::fs::file_status status;
    std::error_code error = llvm::sys::fs::status(file, status);
    if (error == std::errc::no_such_file_or_directory)
      return false;
    if (error)
      return fileError(file, "cannot open: " + error.message());
    return true;
  };
  llvm::Expected<bool> hasIndex = present(index);
  if (!hasIndex)
    return hasIndex.takeError();
  if (!*hasIndex) {
    llvm::Expected<bool> hasSingle = present(single);
    if (!hasSingle)
      return hasSingle.takeError();
    if (!*hasSingle)
      return fileError(path, "no model.safetensors or "
                             "model.safetensors.index.json in this folder");
    llvm::Expected<const SafetensorsFile *> file = addFile(single);
    if (!file)
      return file.takeError();
    ownAll(*file);
    checkpoint.description = std::string(single);
    return checkpoint;
  }
  checkpoint.description = std::string(index);

  llvm::Expected<json::Value> parsed = readJsonFile(index);
  if (!parsed)
    return parsed.takeError();
  const json::Object *weightMap =
      parsed->getAsObject() ? parsed->getAsObject()->getObject("weight_map")
                            : nullptr;
  if (!weightMap)
    return fileError(index, "has no weight_map object");
  llvm::StringMap<const SafetensorsFile *> shards;
  for (const auto &[name, shardValue] : *weightMap) {
    std::optional<llvm::StringRef> shard = shardValue.getAsString();
    if (!shard)
      return fileError(index, "weight_map entry '" + llvm::StringRef(name) +
                                  "' is not a file name");
    // A shard is a file of the model folder, never a path out of it.
    if (shard->empty() || *shard == "." || *shard == ".." ||
        shard->find_first_of("/\\") != llvm::StringRef::npos)
      return fileError(index, "weight_map entry '" + llvm::StringRef(name) +
                                  "' names '" + *shard +
                                  "': shards must be files of the model "
                                  "folder, named without a path");
    auto [it, isNew] = shards.try_emplace(*shard, nullptr);
    if (isNew) {
      llvm::SmallString<256> shardPath(path);
      llvm::sys::path::append(shardPath, *shard);
      llvm::Expected<const SafetensorsFile *> file = addFile(shardPath);
      if (!file)
        return file.takeError();
      it->second = *file;
    }
    if (!it->second->find(name))
      return fileError(it->second->path(),
                       "the index lists tensor '" + llvm::StringRef(name) +
                           "' here, but the file does not hold it");
    checkpoint.owner[name] = it->second;
  }
  return checkpoint;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> all;
  for (const auto &entry : owner)
    all.push_back(entry.getKey().str());
  llvm::sort(all);
  return all;
}

llvm::Error
SafetensorsCheckpoint::readF32(llvm::StringRef name,
                               llvm::ArrayRef<int64_t> shape,
                               llvm::MutableArrayRef<float> out) const {
  auto it = owner.find(name);
  if (it == owner.end())
    return fileError(description, "no tensor named '" + name + "'");
  return it->second->readF32(name, shape, out);
}

llvm::Error SafetensorsCheckpoint::readBlockF32(
    llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
    llvm::ArrayRef<int64_t> offset, llvm::ArrayRef<int64_t> extent,
    llvm::MutableArrayRef<float> out) const {
  auto it = owner.find(name);
  if (it == owner.end())
    return fileError(description, "no tensor named '" + name + "'");
  if (!isBitsAndBytes4bit(*this, name))
    return it->second->readBlockF32(name, shape, offset, extent, out);
  // A 4-bit weight, dequantized whole on the host, its block kept.
  llvm::Expected<std::vector<float>> values =
      dequantizeBitsAndBytes4bit(*this, name, shape);
  if (!values)
    return values.takeError();
  if (llvm::Error error = checkBlock(fileOf(name), name, shape, shape, offset,
                                     extent, out.size()))
    return error;
  copyBlock(DType::F32, reinterpret_cast<const char *>(values->data()), shape,
            offset, extent, out);
  return llvm::Error::success();
}

llvm::Error SafetensorsCheckpoint::readRowsF32(
    llvm::StringRef name, int64_t firstRow, int64_t rows, int64_t firstColumn,
    int64_t width, llvm::MutableArrayRef<float> out) const {
  auto it = owner.find(name);
  if (it == owner.end())
    return fileError(description, "no tensor named '" + name + "'");
  return it->second->readRowsF32(name, firstRow, rows, firstColumn, width, out);
}

llvm::Error SafetensorsCheckpoint::readStackedBlockF32(
    llvm::ArrayRef<std::string> tensors, llvm::ArrayRef<int64_t> shape,
    llvm::ArrayRef<int64_t> offset, llvm::ArrayRef<int64_t> extent,
    llvm::MutableArrayRef<float> out) const {
  if (tensors.empty() || shape.empty() || offset.size() != shape.size() ||
      extent.size() != shape.size())
    return fileError(description,
                     "a stacked tensor needs tensors and a block of its rank");
  int64_t columns = shape.back(), rows = 1;
  for (int64_t size : shape.drop_back())
    rows *= size;
  // Each tensor's first row among the stacked rows.
  std::vector<int64_t> firsts{0};
  for (const std::string &tensor : tensors) {
    const TensorInfo *info = find(tensor);
    if (!info)
      return fileError(description, "no tensor named '" + tensor + "'");
    if (info->shape.size() < 2 || info->shape.back() != columns)
      return fileError(fileOf(tensor),
                       llvm::formatv("'{0}' must have shape [..., {1}], as "
                                     "the rows of a tensor of {2} columns",
                                     tensor, columns, columns));
    firsts.push_back(firsts.back() + rowsView(info->shape)[0]);
  }
  if (firsts.back() != rows)
    return fileError(description,
                     llvm::formatv("'{0}' and the tensors after it hold {1} "
                                   "rows, where {2} are needed",
                                   tensors.front(), firsts.back(), rows));
  if (llvm::Error error = checkBlock(description, tensors.front(), shape, shape,
                                     offset, extent, out.size()))
    return error;
  // The block's rows in order: consecutive rows of one tensor are one read.
  int64_t blockRows = 1;
  for (int64_t size : extent.drop_back())
    blockRows *= size;
  std::vector<int64_t> index(shape.size() - 1, 0);
  auto globalRow = [&] {
    int64_t row = 0;
    for (size_t d = 0; d < index.size(); ++d)
      row = row * shape[d] + offset[d] + index[d];
    return row;
  };
  auto advance = [&] { // to the block's next row
    for (int d = int(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < extent[d])
        return;
      index[d] = 0;
    }
  };
  int64_t done = 0;
  while (done < blockRows) {
    int64_t row = globalRow();
    size_t t = std::upper_bound(firsts.begin(), firsts.end(), row) -
               firsts.begin() - 1;
    // Rows of the block after this one that follow it in tensor t.
    int64_t run = 1;
    advance();
    while (done + run < blockRows && globalRow() == row + run &&
           row + run < firsts[t + 1]) {
      ++run;
      advance();
    }
    const std::string &tensor = tensors[t];
    int64_t width = extent.back();
    if (llvm::Error error =
            readRowsF32(tensor, row - firsts[t], run, offset.back(), width,
                        out.slice(done * width, run * width)))
      return error;
    done += run;
  }
  return llvm::Error::success();
}

llvm::Expected<llvm::ArrayRef<uint8_t>>
SafetensorsCheckpoint::bytes(llvm::StringRef name) const {
  auto it = owner.find(name);
  if (it == owner.end())
    return fileError(description, "no tensor named '" + name + "'");
  return it->second->bytes(name);
}

uint64_t SafetensorsCheckpoint::bytesRead() const {
  uint64_t total = 0;
  for (const auto &file : files)
    total += file->bytesRead();
  return total;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

llvm::Error twill::io::writeSafetensors(
    llvm::StringRef path, llvm::ArrayRef<NamedTensor> tensors,
    const std::map<std::string, std::string> &metadata) {
  json::Object header;
  if (!metadata.empty()) {
    json::Object meta;
    for (const auto &[key, value] : metadata)
      meta[key] = value;
    header["__metadata__"] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const NamedTensor &tensor : tensors) {
    uint64_t bytes = tensor.byteSize();
    header[tensor.name] =
        json::Object{{"dtype", tensor.bytes ? "U8" : "F32"},
                     {"shape", json::Array(tensor.shape)},
                     {"data_offsets", json::Array{offset, offset + bytes}}};
    offset += bytes;
  }
  std::string headerText;
  llvm::raw_string_ostream(headerText) << json::Value(std::move(header));
  headerText.append((8 - headerText.size() % 8) % 8, ' '); // 8-byte aligned

  return writeFileAtomically(path, [&](llvm::raw_ostream &os) {
    char size[8];
    llvm::support::endian::write64le(size, headerText.size());
    os.write(size, sizeof(size));
    os << headerText;
    for (const NamedTensor &tensor : tensors)
      if (tensor.bytes)
        os.write(reinterpret_cast<const char *>(tensor.bytes->data()),
                 tensor.bytes->size());
      else
        os.write(reinterpret_cast<const char *>(tensor.values.data()),
                 tensor.values.size() * sizeof(float));
  });
}
