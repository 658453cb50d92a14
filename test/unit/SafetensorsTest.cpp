//===- SafetensorsTest.cpp - reading and writing safetensors --------------===//

#include "runtime/io/Safetensors.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
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

} // namespace
