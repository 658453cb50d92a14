//===- SafetensorsTest.cpp - reading and writing safetensors --------------===//

#include "runtime/io/Safetensors.h"
#include "runtime/executable/BFloat16.h"
#include "runtime/io/BitsAndBytes.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <unistd.h>

using namespace twill::io;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("twill-st", path));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<256> result(path);
    llvm::sys::path::append(result, name);
    return std::string(result);
  }
  std::string str() const { return std::string(path); }

private:
  llvm::SmallString<256> path;
};

void writeBytes(llvm::StringRef path, llvm::StringRef bytes) {
  std::error_code error;
  llvm::raw_fd_ostream os(path, error);
  ASSERT_FALSE(error) << error.message();
  os << bytes;
}

/// A file with a hand-written header, for malformed cases.
void writeRaw(llvm::StringRef path, llvm::StringRef header, size_t dataBytes) {
  std::string bytes(8, '\0');
  llvm::support::endian::write64le(bytes.data(), header.size());
  bytes += header.str();
  bytes.append(dataBytes, '\0');
  writeBytes(path, bytes);
}

/// Cuts `path` to its first `size` bytes.
std::error_code truncate(llvm::StringRef path, uint64_t size) {
  return std::error_code(::truncate(path.str().c_str(), size) ? errno : 0,
                         std::generic_category());
}

std::string errorOf(llvm::Error error) {
  EXPECT_TRUE(bool(error)) << "expected an error";
  return llvm::toString(std::move(error));
}

template <typename T> std::string errorOf(llvm::Expected<T> value) {
  if (value) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(value.takeError());
}

std::string oracleFile(llvm::StringRef name) {
  return (llvm::Twine(TWILL_ORACLE_DIR) + "/" + name).str();
}

bool sameBits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0 ||
         (std::isnan(a) && std::isnan(b));
}

TEST(Safetensors, WriteThenReadRoundTrips) {
  TempDir dir;
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
  std::vector<float> b = {42.0f};
  ASSERT_FALSE(writeSafetensors(dir.file("t.safetensors"),
                                {{"layer.a", {2, 3}, a}, {"b", {1}, b}},
                                {{"format", "pt"}}));
  auto file = SafetensorsFile::open(dir.file("t.safetensors"));
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  EXPECT_THAT((*file)->names(), ::testing::ElementsAre("b", "layer.a"));
  std::vector<float> read(6);
  ASSERT_FALSE((*file)->readF32("layer.a", {2, 3}, read));
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(sameBits(read[i], a[i])) << i;
  // Nothing is left beside the file.
  std::error_code error;
  int entries = 0;
  for (llvm::sys::fs::directory_iterator it(dir.str(), error), end;
       it != end && !error; it.increment(error))
    ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Safetensors, ConvertsLikeTorch) {
  auto file = SafetensorsFile::open(oracleFile("dtypes.safetensors"));
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  for (auto [name, shape] :
       {std::pair<std::string, std::vector<int64_t>>{"x", {3, 5, 7}},
        {"special", {14}}}) {
    int64_t count = 1;
    for (int64_t d : shape)
      count *= d;
    for (const char *dtype : {"f32", "f16", "bf16"}) {
      std::vector<float> converted(count), reference(count);
      std::string stored = name + "." + dtype;
      ASSERT_FALSE((*file)->readF32(stored, shape, converted));
      std::string widened =
          std::string(dtype) == "f32" ? stored : stored + ".as_f32";
      ASSERT_FALSE((*file)->readF32(widened, shape, reference));
      for (int64_t i = 0; i < count; ++i)
        EXPECT_TRUE(sameBits(converted[i], reference[i]))
            << stored << "[" << i << "] = " << converted[i] << ", torch says "
            << reference[i];
    }
  }
}

TEST(Safetensors, ShardRangesNeedNotDivide) {
  using Range = std::pair<int64_t, int64_t>;
  EXPECT_EQ(shardRange(10, 4, 0), Range(0, 3));
  EXPECT_EQ(shardRange(10, 4, 3), Range(9, 1));
  EXPECT_EQ(shardRange(2, 4, 1), Range(1, 1));
  EXPECT_EQ(shardRange(2, 4, 3), Range(2, 0));
  EXPECT_EQ(shardRange(8, 1, 0), Range(0, 8));
}

TEST(Safetensors, EachRankReadsOnlyItsSlice) {
  auto file = SafetensorsFile::open(oracleFile("dtypes.safetensors"));
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  const std::vector<int64_t> shape = {3, 5, 7};
  std::vector<float> whole(105);
  ASSERT_FALSE((*file)->readF32("x.bf16", shape, whole));
  uint64_t wholeBytes = (*file)->bytesRead();
  EXPECT_EQ(wholeBytes, 105u * 2);

  // A 2 x 4 mesh of "ranks" splits dims (a, b) of the tensor, for every
  // pair of dims: blocks need not divide (5 rows: 2, 2, 1, 0). Each rank
  // reads its block only; together they read exactly the tensor.
  for (auto [first, second] : {std::pair{0, 1}, {0, 2}, {1, 2}}) {
    uint64_t before = (*file)->bytesRead();
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        std::vector<int64_t> offset(3, 0), extent = shape;
        std::tie(offset[first], extent[first]) = shardRange(shape[first], 2, i);
        std::tie(offset[second], extent[second]) =
            shardRange(shape[second], 4, j);
        std::vector<float> block(extent[0] * extent[1] * extent[2]);
        uint64_t start = (*file)->bytesRead();
        ASSERT_FALSE(
            (*file)->readBlockF32("x.bf16", shape, offset, extent, block));
        EXPECT_EQ((*file)->bytesRead() - start, block.size() * 2);
        for (int64_t a = 0; a < extent[0]; ++a)
          for (int64_t b = 0; b < extent[1]; ++b)
            for (int64_t c = 0; c < extent[2]; ++c)
              ASSERT_EQ(block[(a * extent[1] + b) * extent[2] + c],
                        whole[((a + offset[0]) * 5 + b + offset[1]) * 7 + c +
                              offset[2]]);
      }
    EXPECT_EQ((*file)->bytesRead() - before, wholeBytes)
        << "dims " << first << ", " << second;
  }

  std::vector<float> tooFew(3);
  EXPECT_THAT(errorOf((*file)->readBlockF32("x.bf16", shape, {0, 4, 0},
                                            {3, 2, 7}, tooFew)),
              HasSubstr("the block at [0, 4, 0] of [3, 2, 7] is outside "
                        "[3, 5, 7]"));
}

TEST(Safetensors, ShardedCheckpointFollowsTheIndex) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  ASSERT_FALSE(writeSafetensors(dir.file("model-00001-of-00002.safetensors"),
                                {{"a", {2, 2}, a}}));
  ASSERT_FALSE(writeSafetensors(dir.file("model-00002-of-00002.safetensors"),
                                {{"b", {2}, b}}));
  writeBytes(dir.file("model.safetensors.index.json"),
             R"({"metadata": {"total_size": 24}, "weight_map": {
                 "a": "model-00001-of-00002.safetensors",
                 "b": "model-00002-of-00002.safetensors"}})");
  auto checkpoint = SafetensorsCheckpoint::open(dir.str());
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::vector<float> read(2);
  ASSERT_FALSE(checkpoint->readF32("b", {2}, read));
  EXPECT_EQ(read, b);
  EXPECT_TRUE(checkpoint->contains("a"));
  EXPECT_THAT(errorOf(checkpoint->readF32("c", {2}, read)),
              AllOf(HasSubstr("model.safetensors.index.json"),
                    HasSubstr("no tensor named 'c'")));
}

TEST(Safetensors, SingleFileFolder) {
  TempDir dir;
  std::vector<float> a = {7, 8};
  ASSERT_FALSE(
      writeSafetensors(dir.file("model.safetensors"), {{"a", {2}, a}}));
  auto checkpoint = SafetensorsCheckpoint::open(dir.str());
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::vector<float> read(2);
  ASSERT_FALSE(checkpoint->readF32("a", {2}, read));
  EXPECT_EQ(read, a);
}

TEST(Safetensors, StackedTensorsReadAsOneByBlocks) {
  // A [3 experts, 4 rows, 2] weight stored as 6 tensors of 2 rows (an
  // expert's gate rows, then its up rows): any block of it, as a rank
  // reads its share, equals the same block of the stacked values.
  TempDir dir;
  std::vector<float> whole(3 * 4 * 2);
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = float(i);
  std::vector<std::string> names;
  std::vector<std::vector<float>> pieces;
  for (int t = 0; t < 6; ++t) {
    names.push_back(
        llvm::formatv("experts.{0}.{1}", t / 2, t % 2 ? "up" : "gate"));
    pieces.emplace_back(whole.begin() + t * 4, whole.begin() + (t + 1) * 4);
  }
  std::vector<NamedTensor> tensors;
  for (int t = 0; t < 6; ++t)
    tensors.push_back({names[t], {2, 2}, pieces[t]});
  ASSERT_FALSE(writeSafetensors(dir.file("model.safetensors"), tensors));
  auto checkpoint = SafetensorsCheckpoint::open(dir.str());
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  struct Block {
    std::vector<int64_t> offset, extent;
  };
  for (const Block &block :
       {Block{{0, 0, 0}, {3, 4, 2}}, Block{{1, 0, 0}, {2, 4, 2}},
        Block{{0, 1, 1}, {3, 2, 1}}, Block{{2, 3, 0}, {1, 1, 2}}}) {
    std::vector<float> read(block.extent[0] * block.extent[1] *
                            block.extent[2]);
    ASSERT_FALSE(checkpoint->readStackedBlockF32(names, {3, 4, 2}, block.offset,
                                                 block.extent, read));
    std::vector<float> expected;
    for (int64_t e = 0; e < block.extent[0]; ++e)
      for (int64_t r = 0; r < block.extent[1]; ++r)
        for (int64_t c = 0; c < block.extent[2]; ++c)
          expected.push_back(
              whole[((block.offset[0] + e) * 4 + block.offset[1] + r) * 2 +
                    block.offset[2] + c]);
    EXPECT_EQ(read, expected) << block.offset[0] << block.offset[1];
  }
  std::vector<float> read(24);
  names.pop_back();
  EXPECT_THAT(errorOf(checkpoint->readStackedBlockF32(
                  names, {3, 4, 2}, {0, 0, 0}, {3, 4, 2}, read)),
              HasSubstr("hold 10 rows, where 12 are needed"));
  EXPECT_THAT(errorOf(checkpoint->readStackedBlockF32(
                  names, {3, 4, 5}, {0, 0, 0}, {3, 4, 5}, read)),
              HasSubstr("'experts.0.gate' must have shape [..., 5]"));
}

TEST(Safetensors, AFusedTensorReadAsItsRows) {
  // A [3 experts, 4 rows, 2] weight stored fused, read as its [12, 2] rows
  // (a quantized expert weight's): any run of rows, any columns.
  TempDir dir;
  std::vector<float> whole(3 * 4 * 2);
  for (size_t i = 0; i < whole.size(); ++i)
    whole[i] = float(i);
  ASSERT_FALSE(writeSafetensors(dir.file("model.safetensors"),
                                {{"experts.gate_up", {3, 4, 2}, whole}}));
  auto checkpoint = SafetensorsCheckpoint::open(dir.str());
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::vector<float> read(5);
  ASSERT_FALSE(checkpoint->readStackedBlockF32({"experts.gate_up"}, {12, 2},
                                               {3, 1}, {5, 1}, read));
  EXPECT_THAT(read, ::testing::ElementsAre(7, 9, 11, 13, 15));
  std::vector<float> all(24);
  ASSERT_FALSE(checkpoint->readRowsF32("experts.gate_up", 0, 12, 0, 2, all));
  EXPECT_EQ(all, whole);
  // Rows beyond the tensor's are refused, naming it.
  EXPECT_THAT(errorOf(checkpoint->readRowsF32(
                  "experts.gate_up", 11, 2, 0, 2,
                  llvm::MutableArrayRef(all).take_front(4))),
              HasSubstr("tensor 'experts.gate_up': the block at [11, 0] of "
                        "[2, 2] is outside [12, 2]"));
  EXPECT_THAT(errorOf(checkpoint->readStackedBlockF32(
                  {"experts.gate_up"}, {6, 2}, {0, 0}, {6, 2}, all)),
              HasSubstr("hold 12 rows, where 6 are needed"));
}

//===----------------------------------------------------------------------===//
// Bad input: every error names the file and, where there is one, the tensor.
//===----------------------------------------------------------------------===//

TEST(SafetensorsBadInput, MissingTensorAndWrongShape) {
  TempDir dir;
  std::string path = dir.file("t.safetensors");
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  ASSERT_FALSE(writeSafetensors(path, {{"w", {2, 3}, a}}));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(bool(file));
  std::vector<float> out(6);
  EXPECT_THAT(errorOf((*file)->readF32("q", {2, 3}, out)),
              AllOf(HasSubstr(path), HasSubstr("no tensor named 'q'")));
  EXPECT_THAT(errorOf((*file)->readF32("w", {3, 2}, out)),
              AllOf(HasSubstr(path),
                    HasSubstr("tensor 'w' has shape [2, 3], expected [3, 2]")));
}

TEST(SafetensorsBadInput, UnsupportedDType) {
  std::string path = oracleFile("int64.safetensors");
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr(path), HasSubstr("tensor 'ids'"),
                    HasSubstr("dtype I64 is not supported")));
}

TEST(SafetensorsBadInput, TruncatedFile) {
  TempDir dir;
  std::string path = dir.file("t.safetensors");
  std::vector<float> a(100, 1.0f);
  ASSERT_FALSE(writeSafetensors(path, {{"w", {10, 10}, a}}));
  uint64_t size;
  ASSERT_FALSE(llvm::sys::fs::file_size(path, size));
  ASSERT_FALSE(truncate(path, size - 10));
  EXPECT_THAT(
      errorOf(SafetensorsFile::open(path)),
      AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("truncated")));

  ASSERT_FALSE(truncate(path, 20)); // inside the header
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr(path), HasSubstr("exceeds the file")));

  ASSERT_FALSE(truncate(path, 5));
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr(path), HasSubstr("only 5 bytes")));
}

TEST(SafetensorsBadInput, CorruptHeader) {
  TempDir dir;
  std::string path = dir.file("t.safetensors");
  writeRaw(path, "{\"w\": {\"dtype\": \"F32\", \"shape\": [2]", 8);
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr(path), HasSubstr("corrupt header")));

  writeRaw(path, "[1, 2]", 0);
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              HasSubstr("corrupt header: not a JSON object"));

  writeRaw(
      path,
      R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}})", 8);
  EXPECT_THAT(
      errorOf(SafetensorsFile::open(path)),
      AllOf(HasSubstr("tensor 'w'"),
            HasSubstr("F32 [2, 2] needs 16 bytes, data_offsets give 8")));

  writeRaw(path,
           R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})",
           8);
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("non-size value")));

  writeRaw(path,
           R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
           8);
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("begin <= end")));

  writeRaw(path, R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8);
  EXPECT_THAT(errorOf(SafetensorsFile::open(path)),
              AllOf(HasSubstr("tensor 'w'"), HasSubstr("no dtype")));
}

TEST(SafetensorsBadInput, BrokenCheckpointFolders) {
  TempDir dir;
  EXPECT_THAT(
      errorOf(SafetensorsCheckpoint::open(dir.str())),
      AllOf(HasSubstr(dir.str()), HasSubstr("no model.safetensors or "
                                            "model.safetensors.index.json")));

  writeBytes(dir.file("model.safetensors.index.json"),
             R"({"weight_map": {"a": "missing.safetensors"}})");
  EXPECT_THAT(
      errorOf(SafetensorsCheckpoint::open(dir.str())),
      AllOf(HasSubstr("missing.safetensors"), HasSubstr("cannot open")));

  std::vector<float> b = {1};
  ASSERT_FALSE(
      writeSafetensors(dir.file("shard.safetensors"), {{"b", {1}, b}}));
  writeBytes(dir.file("model.safetensors.index.json"),
             R"({"weight_map": {"a": "shard.safetensors"}})");
  EXPECT_THAT(errorOf(SafetensorsCheckpoint::open(dir.str())),
              AllOf(HasSubstr("shard.safetensors"),
                    HasSubstr("lists tensor 'a' here")));

  writeBytes(dir.file("model.safetensors.index.json"), "{\"weight_map\": ");
  EXPECT_THAT(errorOf(SafetensorsCheckpoint::open(dir.str())),
              AllOf(HasSubstr("model.safetensors.index.json"),
                    HasSubstr("not valid JSON")));
}

TEST(SafetensorsBadInput, MissingFile) {
  EXPECT_THAT(
      errorOf(SafetensorsFile::open("/nonexistent/x.safetensors")),
      AllOf(HasSubstr("/nonexistent/x.safetensors"), HasSubstr("cannot open")));
}

/// A stored tensor: its name, dtype, shape and bytes.
struct Stored {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string floatBytes(llvm::ArrayRef<float> values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

/// A file of `tensors`, their bytes one after another.
void writeTensors(llvm::StringRef path, llvm::ArrayRef<Stored> tensors) {
  std::string header = "{", data;
  for (const Stored &tensor : tensors) {
    std::string shape;
    for (int64_t dim : tensor.shape)
      shape += (shape.empty() ? "" : ",") + std::to_string(dim);
    header +=
        llvm::formatv(R"({0}"{1}": {"dtype": "{2}", "shape": [{3}], )"
                      R"("data_offsets": [{4}, {5}]})",
                      header.size() > 1 ? ", " : "", tensor.name, tensor.dtype,
                      shape, data.size(), data.size() + tensor.bytes.size())
            .str();
    data += tensor.bytes;
  }
  header += "}";
  std::string bytes(8, '\0');
  llvm::support::endian::write64le(bytes.data(), header.size());
  writeBytes(path, bytes + header + data);
}

/// bitsandbytes' NF4 levels.
const std::vector<float> kLevels = {-1.0f,
                                    -0.6961928009986877f,
                                    -0.5250730514526367f,
                                    -0.39491748809814453f,
                                    -0.28444138169288635f,
                                    -0.18477343022823334f,
                                    -0.09105003625154495f,
                                    0.0f,
                                    0.07958029955625534f,
                                    0.16093020141124725f,
                                    0.24611230194568634f,
                                    0.33791524171829224f,
                                    0.44070982933044434f,
                                    0.5626170039176941f,
                                    0.7229568362236023f,
                                    1.0f};

/// A 2 x 5 weight in blocks of 4 (rows are not whole blocks), its scales
/// with double quantization or not; `state` replaces the quant state.
std::vector<Stored> fourBitWeight(bool nested, std::string state = "") {
  std::string codes = {'\x0f', '\x70', '\x3c', '\xa5', '\x81'};
  std::vector<Stored> tensors = {
      {"w", "U8", {5, 1}, codes},
      {"w.quant_map", "F32", {16}, floatBytes(kLevels)}};
  if (state.empty())
    state = nested ? R"({"quant_type": "nf4", "blocksize": 4, "dtype": )"
                     R"("bfloat16", "shape": [2, 5], "nested_blocksize": 2,)"
                     R"( "nested_dtype": "float32", "nested_offset": 0.5})"
                   : R"({"quant_type": "nf4", "blocksize": 4, "dtype": )"
                     R"("bfloat16", "shape": [2, 5]})";
  if (nested) {
    std::vector<float> map(256);
    for (int i = 0; i < 256; ++i)
      map[i] = (i - 128) / 128.0f;
    tensors.push_back({"w.absmax", "U8", {3}, std::string("\x90\xa0\xc0")});
    tensors.push_back({"w.nested_quant_map", "F32", {256}, floatBytes(map)});
    tensors.push_back(
        {"w.nested_absmax", "F32", {2}, floatBytes({2.0f, 4.0f})});
  } else {
    tensors.push_back({"w.absmax", "F32", {3}, floatBytes({0.5f, 3.0f, 7.0f})});
  }
  tensors.push_back({"w" + std::string(kNf4StateSuffix),
                     "U8",
                     {int64_t(state.size())},
                     state});
  return tensors;
}

TEST(BitsAndBytes, FourBitWeightsReadAsBitsAndBytesDequantizesThem) {
  TempDir dir;
  for (bool nested : {false, true}) {
    std::string path =
        dir.file(nested ? "nested.safetensors" : "flat.safetensors");
    writeTensors(path, fourBitWeight(nested));
    auto checkpoint = SafetensorsCheckpoint::open(path);
    ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
    // The naive reference: value i is the level of its nibble (high first)
    // times its flat block's scale, rounded to bf16.
    std::vector<float> scales =
        nested ? std::vector<float>{(0x90 - 128) / 128.0f * 2 + 0.5f,
                                    (0xa0 - 128) / 128.0f * 2 + 0.5f,
                                    (0xc0 - 128) / 128.0f * 4 + 0.5f}
               : std::vector<float>{0.5f, 3.0f, 7.0f};
    const uint8_t codes[] = {0x0f, 0x70, 0x3c, 0xa5, 0x81};
    std::vector<float> expected(10);
    for (int i = 0; i < 10; ++i) {
      int code = i % 2 ? codes[i / 2] & 0xf : codes[i / 2] >> 4;
      expected[i] =
          twill::bf16ToFloat(twill::floatToBF16(kLevels[code] * scales[i / 4]));
    }
    // Row 1, columns 1-3: a block across the rows' edge.
    std::vector<float> block(3);
    ASSERT_FALSE(
        bool(checkpoint->readBlockF32("w", {2, 5}, {1, 1}, {1, 3}, block)));
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(sameBits(block[i], expected[5 + 1 + i])) << nested << i;
  }
}

/// What reading the 4-bit weight "w" ([2, 5]) of a file of `tensors` says.
std::string fourBitError(TempDir &dir, const std::vector<Stored> &tensors) {
  std::string path = dir.file("four-bit.safetensors");
  writeTensors(path, tensors);
  auto checkpoint = SafetensorsCheckpoint::open(path);
  EXPECT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::vector<float> values(10);
  return errorOf(checkpoint->readBlockF32("w", {2, 5}, {0, 0}, {2, 5}, values));
}

TEST(BitsAndBytes, InconsistentFourBitWeightsAreNamed) {
  TempDir dir;
  auto errorFor = [&](const std::vector<Stored> &tensors) {
    return fourBitError(dir, tensors);
  };
  EXPECT_THAT(errorFor(fourBitWeight(false, R"({"quant_type": "nf4", )"
                                            R"("blocksize": 4, "dtype": )"
                                            R"("bfloat16", "shape": [5, 2]})")),
              HasSubstr("4-bit weight 'w': its quant state's shape is [5, "
                        "2], the model's [2, 5]"));
  EXPECT_THAT(errorFor(fourBitWeight(false, R"({"quant_type": "nf4", )"
                                            R"("blocksize": 0, "dtype": )"
                                            R"("bfloat16", "shape": [2, 5]})")),
              HasSubstr("its quant state "
                        "'w.quant_state.bitsandbytes__nf4': blocksize must be "
                        "a positive size, at most 1048576, got 0"));
  std::vector<Stored> shortCodes = fourBitWeight(true);
  shortCodes[0].bytes.pop_back();
  shortCodes[0].shape = {4, 1};
  EXPECT_THAT(errorFor(shortCodes),
              HasSubstr("it holds 4 bytes of codes for 10 values, which "
                        "take 5 (two a byte)"));
  std::vector<Stored> fp4 = fourBitWeight(false);
  fp4.back().name = "w.quant_state.bitsandbytes__fp4";
  EXPECT_THAT(errorFor(fp4),
              HasSubstr("4-bit weight 'w': it is FP4 (bnb_4bit_quant_type "
                        "\"fp4\"); only NF4 (\"nf4\") is read"));
  EXPECT_THAT(errorFor(fourBitWeight(false, R"({"quant_type": "fp4", )"
                                            R"("blocksize": 4, "dtype": )"
                                            R"("bfloat16", "shape": [2, 5]})")),
              HasSubstr("its quant state 'w.quant_state.bitsandbytes__nf4' "
                        "has quant_type \"fp4\", not \"nf4\""));
  // A U8 tensor that is no 4-bit weight is not read as numbers.
  std::string path = dir.file("bytes.safetensors");
  writeTensors(path, {{"b", "U8", {2}, "ab"}});
  auto checkpoint = SafetensorsCheckpoint::open(path);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  std::vector<float> two(2);
  EXPECT_THAT(errorOf(checkpoint->readBlockF32("b", {2}, {0}, {2}, two)),
              HasSubstr("tensor 'b' is U8"));
}

// A double-quantized weight (bitsandbytes takes it as one where
// W.nested_absmax is there) whose quant state or nested tensors are
// missing a field or hold non-finite numbers: refused as it is read,
// naming the tensor and the field, never read as another layout or
// trained on as nan.
TEST(BitsAndBytes, BrokenNestedQuantStatesNameTheTensorAndField) {
  TempDir dir;
  auto errorFor = [&](const std::vector<Stored> &tensors) {
    return fourBitError(dir, tensors);
  };
  // The complete state less `key`, or with `key` set to `value`.
  auto state = [](llvm::StringRef key, llvm::StringRef value = "") {
    std::string fields;
    for (auto [field, stated] : {std::pair{"quant_type", "\"nf4\""},
                                 {"blocksize", "4"},
                                 {"dtype", "\"bfloat16\""},
                                 {"shape", "[2, 5]"},
                                 {"nested_blocksize", "2"},
                                 {"nested_dtype", "\"float32\""},
                                 {"nested_offset", "0.5"}}) {
      if (field == key && value.empty())
        continue;
      fields += llvm::formatv("{0}\"{1}\": {2}", fields.empty() ? "" : ", ",
                              field, field == key ? value : stated);
    }
    return fourBitWeight(true, "{" + fields + "}");
  };
  const std::string stateName = "'w.quant_state.bitsandbytes__nf4'";
  for (llvm::StringRef key :
       {"nested_offset", "nested_blocksize", "nested_dtype"})
    EXPECT_THAT(errorFor(state(key)),
                HasSubstr("4-bit weight 'w': its quant state " + stateName +
                          " has no " + key.str() +
                          ", which double quantization (w.nested_absmax) "
                          "needs"))
        << key.str();
  EXPECT_THAT(errorFor(state("blocksize")),
              HasSubstr("its quant state " + stateName + " has no blocksize"));
  EXPECT_THAT(errorFor(state("nested_offset", "1e999")),
              HasSubstr("its quant state " + stateName +
                        ": nested_offset is INF, not a finite number"));
  EXPECT_THAT(errorFor(state("nested_offset", "\"0.5\"")),
              HasSubstr(stateName + ": nested_offset must be a number"));
  EXPECT_THAT(errorFor(state("nested_blocksize", "0")),
              HasSubstr(stateName + ": nested_blocksize must be a positive "
                                    "size, at most 1048576, got 0"));
  EXPECT_THAT(errorFor(state("nested_dtype", "\"float16\"")),
              HasSubstr(stateName + ": nested_dtype is \"float16\"; "
                                    "bitsandbytes codes its scales' scales "
                                    "as float32"));
  // The state says double quantization, and its nested scales are absent.
  std::vector<Stored> noNested = fourBitWeight(true);
  llvm::erase_if(noNested, [](const Stored &tensor) {
    return tensor.name == "w.nested_absmax";
  });
  EXPECT_THAT(errorFor(noNested),
              HasSubstr("4-bit weight 'w': its quant state " + stateName +
                        " has a nested_offset (double quantization), but the "
                        "checkpoint has no 'w.nested_absmax'"));
  // Each float part: a nan or an infinity in it names it.
  for (auto [part, bad] : {std::pair{"w.nested_absmax", NAN},
                           {"w.nested_quant_map", INFINITY},
                           {"w.quant_map", NAN}}) {
    std::vector<Stored> tensors = fourBitWeight(true);
    for (Stored &tensor : tensors)
      if (tensor.name == part)
        std::memcpy(tensor.bytes.data() + sizeof(float), &bad, sizeof bad);
    EXPECT_THAT(errorFor(tensors),
                HasSubstr("4-bit weight 'w': '" + std::string(part) +
                          "' holds " + (std::isnan(bad) ? "nan" : "INF") +
                          " at element 1: a checkpoint must hold finite "
                          "numbers"))
        << part;
  }
  // Finite parts whose scale overflows (block 1: 0.25 x 3e38 + 3e38).
  std::vector<Stored> overflow = state("nested_offset", "3e38");
  for (Stored &tensor : overflow)
    if (tensor.name == "w.nested_absmax")
      tensor.bytes = floatBytes({3e38f, 3e38f});
  EXPECT_THAT(errorFor(overflow),
              HasSubstr("4-bit weight 'w': block 1's scale (nested_quant_map "
                        "times nested_absmax plus nested_offset) is INF"));
  std::vector<Stored> flat = fourBitWeight(false);
  float infinity = -INFINITY;
  std::memcpy(flat[2].bytes.data(), &infinity, sizeof infinity);
  EXPECT_THAT(errorFor(flat), HasSubstr("'w.absmax' holds -INF at element 0"));
}

TEST(BitsAndBytes, QuantizedBlocksCodeTheirNearestLevels) {
  // Block b holds every NF4 level times b + 1 (and block 3 zeros): each
  // value codes as its own level, each scale comes back within the dynamic
  // map's step, and the offset is the absmaxes' mean.
  const int64_t blocks = 5;
  std::vector<float> values;
  for (int64_t b = 0; b < blocks; ++b)
    for (int i = 0; i < 16; ++i)
      values.push_back(b == 3 ? 0.0f : kLevels[i] * float(b + 1));
  Nf4Weight weight = quantizeNf4(values, 16, 2);
  ASSERT_EQ(weight.codes.size(), values.size() / 2);
  for (size_t i = 0; i < values.size(); ++i) {
    int code = i % 2 ? weight.codes[i / 2] & 0xf : weight.codes[i / 2] >> 4;
    EXPECT_EQ(code, (i / 16) == 3 ? 7 : int(i % 16)) << i;
  }
  EXPECT_EQ(weight.nestedOffset, (1.0f + 2 + 3 + 0 + 5) / 5);
  ASSERT_EQ(weight.nestedAbsmax.size(), 3u);
  for (int64_t b = 0; b < blocks; ++b)
    EXPECT_NEAR(weight.scale(b), b == 3 ? 0.0 : double(b + 1), 0.02) << b;
  std::vector<float> back(values.size());
  dequantizeNf4(weight, back);
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_NEAR(back[i], values[i], 0.02) << i;
}

TEST(BitsAndBytes, TheOffsetIsTorchsFp32MeanOfTheScales) {
  // 1000 blocks, block b all a_b: the scales are the a_b, whose mean torch
  // (torch.tensor(a).mean(), as bitsandbytes takes it) gives as 0x3f02d119;
  // the exactly rounded mean and a running fp32 sum give 0x3f02d118.
  std::vector<float> values;
  for (int b = 0; b < 1000; ++b)
    values.insert(values.end(), 64,
                  float(0.01 + double((b * 7919) % 1000) / 997.0));
  Nf4Weight weight = quantizeNf4(values, 64, 256);
  uint32_t bits;
  std::memcpy(&bits, &weight.nestedOffset, sizeof bits);
  EXPECT_EQ(bits, 0x3f02d119u);
}

TEST(BitsAndBytes, QuantizedWeightsWrittenAsFourBitCheckpointsReadBack) {
  // Twill's quantization stored as transformers stores a 4-bit weight
  // reads back byte for byte, and dequantizes as dequantizeNf4 does.
  std::vector<float> values(6 * 32);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = std::sin(float(i) * 0.37f) * float(1 + i % 7);
  Nf4Weight weight = quantizeNf4(values, 16, 4);
  std::string state =
      llvm::formatv(R"({{"quant_type": "nf4", "blocksize": 16, "dtype": )"
                    R"("float32", "shape": [6, 32], "nested_blocksize": 4, )"
                    R"("nested_dtype": "float32", "nested_offset": {0}})",
                    llvm::format("%.9g", double(weight.nestedOffset)))
          .str();
  auto bytes = [](const std::vector<uint8_t> &from) {
    return std::string(from.begin(), from.end());
  };
  std::vector<float> map(dynamicMap().begin(), dynamicMap().end());
  std::vector<Stored> tensors = {
      {"w", "U8", {int64_t(weight.codes.size()), 1}, bytes(weight.codes)},
      {"w.quant_map", "F32", {16}, floatBytes(kLevels)},
      {"w.absmax", "U8", {int64_t(weight.absmax.size())}, bytes(weight.absmax)},
      {"w.nested_quant_map", "F32", {256}, floatBytes(map)},
      {"w.nested_absmax",
       "F32",
       {int64_t(weight.nestedAbsmax.size())},
       floatBytes(weight.nestedAbsmax)},
      {"w" + std::string(kNf4StateSuffix),
       "U8",
       {int64_t(state.size())},
       state}};
  TempDir dir;
  std::string path = dir.file("quantized.safetensors");
  writeTensors(path, tensors);
  auto checkpoint = SafetensorsCheckpoint::open(path);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
  llvm::Expected<Nf4Weight> read =
      readBitsAndBytes4bit(*checkpoint, "w", {6, 32});
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(read->codes, weight.codes);
  EXPECT_EQ(read->absmax, weight.absmax);
  EXPECT_EQ(read->nestedAbsmax, weight.nestedAbsmax);
  EXPECT_TRUE(sameBits(read->nestedOffset, weight.nestedOffset));
  std::vector<float> ours(values.size());
  dequantizeNf4(weight, ours);
  llvm::Expected<std::vector<float>> theirs =
      dequantizeBitsAndBytes4bit(*checkpoint, "w", {6, 32});
  ASSERT_TRUE(bool(theirs)) << llvm::toString(theirs.takeError());
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(sameBits(ours[i], (*theirs)[i])) << i;
}

TEST(BitsAndBytes, AQuantizedBaseReadsOnlyDoubleQuantizedNf4) {
  TempDir dir;
  auto errorFor = [&](std::vector<Stored> tensors) {
    std::string path = dir.file("base.safetensors");
    writeTensors(path, tensors);
    auto checkpoint = SafetensorsCheckpoint::open(path);
    EXPECT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
    return errorOf(readBitsAndBytes4bit(*checkpoint, "w", {2, 5}));
  };
  EXPECT_THAT(errorFor(fourBitWeight(false)),
              HasSubstr("4-bit weight 'w': its scales are not "
                        "double-quantized"));
  // fourBitWeight's nested map is a made-up one.
  EXPECT_THAT(errorFor(fourBitWeight(true)),
              HasSubstr("its nested_quant_map is not bitsandbytes' signed "
                        "dynamic map"));
}

} // namespace
