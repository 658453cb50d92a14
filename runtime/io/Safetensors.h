//===- Safetensors.h - Hugging Face safetensors files -----------*- C++ -*-===//
//
// The format: an 8-byte little-endian header size N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}), then the tensor bytes. Files are memory-mapped;
// tensors stored as F32, F16 or BF16 are converted to fp32 on read. Every
// error names the file and, where there is one, the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_IO_SAFETENSORS_H
#define TWILL_RUNTIME_IO_SAFETENSORS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace twill::io {

/// The stored element types read: floats, and bytes (the codes and
/// statistics of quantized weights, BitsAndBytes.h).
enum class DType { F32, F16, BF16, U8 };

/// Where one tensor lies in its file.
struct TensorInfo {
  DType dtype;
  std::vector<int64_t> shape;
  /// Byte range within the data section (after the header).
  uint64_t begin, end;

  int64_t numElements() const;
};

/// One memory-mapped .safetensors file.
class SafetensorsFile {
public:
  /// Maps `path` and checks its header: sizes, dtypes, shapes and byte
  /// ranges, so later reads cannot go out of bounds.
  static llvm::Expected<std::unique_ptr<SafetensorsFile>>
  open(llvm::StringRef path);

  llvm::StringRef path() const { return filePath; }
  const TensorInfo *find(llvm::StringRef name) const;
  std::vector<std::string> names() const;

  /// Reads `name`, which must have `shape`, into `out` as fp32.
  llvm::Error readF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                      llvm::MutableArrayRef<float> out) const;

  /// Reads the block of `name` (which must have `shape`) from `offset`,
  /// `extent` long in each dim, converting and counting only its elements:
  /// how a rank reads the slice of a tensor its placement owns.
  llvm::Error readBlockF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                           llvm::ArrayRef<int64_t> offset,
                           llvm::ArrayRef<int64_t> extent,
                           llvm::MutableArrayRef<float> out) const;

  /// Reads rows [firstRow, firstRow + rows) and columns [firstColumn,
  /// firstColumn + width) of tensor `name` seen as its rows (every dim but
  /// the last flattened: a mixture of experts' [experts, out, in] as
  /// [experts x out, in]) into `out`, as readBlockF32 does.
  llvm::Error readRowsF32(llvm::StringRef name, int64_t firstRow, int64_t rows,
                          int64_t firstColumn, int64_t width,
                          llvm::MutableArrayRef<float> out) const;

  /// The bytes of U8 tensor `name`, as stored.
  llvm::Expected<llvm::ArrayRef<uint8_t>> bytes(llvm::StringRef name) const;

  /// Bytes of tensor data read so far.
  uint64_t bytesRead() const { return dataBytesRead; }

private:
  /// readBlockF32 of `tensor` (named `name`) seen as of shape `stored`.
  llvm::Error readBlockF32As(const TensorInfo &tensor, llvm::StringRef name,
                             llvm::ArrayRef<int64_t> stored,
                             llvm::ArrayRef<int64_t> shape,
                             llvm::ArrayRef<int64_t> offset,
                             llvm::ArrayRef<int64_t> extent,
                             llvm::MutableArrayRef<float> out) const;

  std::string filePath;
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  const char *data = nullptr; // start of the data section
  llvm::StringMap<TensorInfo> tensors;
  mutable uint64_t dataBytesRead = 0;
};

/// Fails, naming `path` and tensor `name`, unless the tensor's `stored`
/// shape is `shape`, the block from `offset`, `extent` long, lies inside it
/// and `outSize` is its count of elements.
llvm::Error checkBlock(llvm::StringRef path, llvm::StringRef name,
                       llvm::ArrayRef<int64_t> stored,
                       llvm::ArrayRef<int64_t> shape,
                       llvm::ArrayRef<int64_t> offset,
                       llvm::ArrayRef<int64_t> extent, size_t outSize);

/// Widens the block of a row-major tensor of `shape` stored at `source` as
/// `dtype` (a float type), from `offset`, `extent` long in each dim (inside
/// `shape`: the caller checks), into `out`.
void copyBlock(DType dtype, const char *source, llvm::ArrayRef<int64_t> shape,
               llvm::ArrayRef<int64_t> offset, llvm::ArrayRef<int64_t> extent,
               llvm::MutableArrayRef<float> out);

/// The weights of a model: one .safetensors file, or a folder holding
/// either `model.safetensors` or shards listed in
/// `model.safetensors.index.json`.
class SafetensorsCheckpoint {
public:
  static llvm::Expected<SafetensorsCheckpoint> open(llvm::StringRef path);

  /// Reads `name` (which must have `shape`) as fp32 from whichever file
  /// holds it.
  llvm::Error readF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                      llvm::MutableArrayRef<float> out) const;
  /// Reads a block of `name` as SafetensorsFile::readBlockF32 does; a weight
  /// stored as bitsandbytes' 4-bit quantization is dequantized first.
  llvm::Error readBlockF32(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                           llvm::ArrayRef<int64_t> offset,
                           llvm::ArrayRef<int64_t> extent,
                           llvm::MutableArrayRef<float> out) const;
  /// Reads rows of tensor `name` as SafetensorsFile::readRowsF32 does,
  /// from whichever file holds it.
  llvm::Error readRowsF32(llvm::StringRef name, int64_t firstRow, int64_t rows,
                          int64_t firstColumn, int64_t width,
                          llvm::MutableArrayRef<float> out) const;
  /// Reads a block, as readBlockF32 does, of the tensor of `shape` whose
  /// rows (over every dim but the last) are those of `tensors` end to end,
  /// each seen as its rows (its last dim shape's): a mixture of experts'
  /// weights stored an expert's tensor at a time, or one fused tensor read
  /// as rows. A run of rows in one tensor is one read.
  llvm::Error readStackedBlockF32(llvm::ArrayRef<std::string> tensors,
                                  llvm::ArrayRef<int64_t> shape,
                                  llvm::ArrayRef<int64_t> offset,
                                  llvm::ArrayRef<int64_t> extent,
                                  llvm::MutableArrayRef<float> out) const;
  /// The bytes of U8 tensor `name`, from whichever file holds it.
  llvm::Expected<llvm::ArrayRef<uint8_t>> bytes(llvm::StringRef name) const;
  /// The shape of `name`, or null if no file holds it.
  const TensorInfo *find(llvm::StringRef name) const {
    auto it = owner.find(name);
    return it == owner.end() ? nullptr : it->second->find(name);
  }
  bool contains(llvm::StringRef name) const { return owner.count(name); }
  /// Every tensor the checkpoint holds (those its index lists), sorted.
  std::vector<std::string> names() const;
  /// The file that holds `name` (the index, for a name it lacks).
  llvm::StringRef fileOf(llvm::StringRef name) const {
    auto it = owner.find(name);
    return it == owner.end() ? llvm::StringRef(description)
                             : it->second->path();
  }
  /// Bytes of tensor data read so far, over every file.
  uint64_t bytesRead() const;

private:
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  llvm::StringMap<const SafetensorsFile *> owner;
  std::string description; // the file or index read, for messages
};

/// The block of `size` rows that part `index` of `parts` owns: blocks of
/// ceil(size / parts) rows, the last ones shorter or empty (DTensor's
/// chunking), so no size has to divide evenly.
std::pair<int64_t, int64_t> shardRange(int64_t size, int64_t parts,
                                       int64_t index);

/// A tensor to write: fp32 values in row-major order, or bytes (U8: a
/// quantized weight's).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  llvm::ArrayRef<float> values;
  std::optional<llvm::ArrayRef<uint8_t>> bytes;

  int64_t byteSize() const {
    return bytes ? int64_t(bytes->size())
                 : int64_t(values.size() * sizeof(float));
  }
};

/// Writes `tensors` as F32 (or U8) to `path` (through a temporary file
/// renamed into place, so a crash never leaves a half-written file under
/// `path`).
llvm::Error
writeSafetensors(llvm::StringRef path, llvm::ArrayRef<NamedTensor> tensors,
                 const std::map<std::string, std::string> &metadata = {});

} // namespace twill::io

#endif // TWILL_RUNTIME_IO_SAFETENSORS_H
