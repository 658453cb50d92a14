//===- TensorBoardTest.cpp - TFRecord framing -----------------------------===//
//
// The checksum TFRecords carry, and the framing of the records an event
// file holds. (That TensorBoard reads the files back is
// test/oracle/tensorboard_events.py, with TensorBoard's own reader.)
//
//===----------------------------------------------------------------------===//

#include "runtime/io/TensorBoard.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace twill;

namespace {

llvm::ArrayRef<uint8_t> bytesOf(llvm::StringRef text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

TEST(TensorBoard, Crc32cMatchesTheCastagnoliCheckValues) {
  // RFC 3720's check value, and its test patterns of 32 zeros and ones.
  EXPECT_EQ(io::crc32c(bytesOf("123456789")), 0xE3069283u);
  EXPECT_EQ(io::crc32c(std::vector<uint8_t>(32, 0x00)), 0x8A9136AAu);
  EXPECT_EQ(io::crc32c(std::vector<uint8_t>(32, 0xFF)), 0x62A8AB43u);
  EXPECT_EQ(io::crc32c({}), 0u);
}

TEST(TensorBoard, EventFileIsAChainOfLengthPrefixedRecords) {
  llvm::SmallString<128> folder;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("twill-tb", folder));
  auto writer = io::EventFileWriter::create(folder);
  ASSERT_TRUE(bool(writer)) << llvm::toString(writer.takeError());
  ASSERT_FALSE((*writer)->scalars(1, {{"train/loss", 2.5f}}));
  ASSERT_FALSE((*writer)->scalars(2, {{"train/loss", 0.0f}}));
  auto file = llvm::MemoryBuffer::getFile((*writer)->path());
  ASSERT_TRUE(bool(file));
  llvm::StringRef data = (*file)->getBuffer();
  int records = 0;
  while (!data.empty()) {
    ASSERT_GE(data.size(), 12u);
    uint64_t length = llvm::support::endian::read64le(data.data());
    ASSERT_GE(data.size(), 16 + length);
    llvm::StringRef record = data.substr(12, length);
    uint32_t crc = io::crc32c(bytesOf(record));
    uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
    EXPECT_EQ(llvm::support::endian::read32le(data.data() + 12 + length),
              masked);
    data = data.drop_front(16 + length);
    ++records;
  }
  EXPECT_EQ(records, 3); // the file version, and one event per step
  llvm::sys::fs::remove_directories(folder);
}

} // namespace
