//===- TensorBoard.cpp - scalars in a TensorBoard event file --------------===//

#include "runtime/io/TensorBoard.h"

#include "proto/tensorboard_event.pb.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <array>
#include <chrono>
#include <unistd.h>

using namespace twill;

uint32_t io::crc32c(llvm::ArrayRef<uint8_t> bytes) {
  // The reflected Castagnoli polynomial, a byte at a time.
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> entries{};
    for (uint32_t byte = 0; byte < 256; ++byte) {
      uint32_t crc = byte;
      for (int bit = 0; bit < 8; ++bit)
        crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
      entries[byte] = crc;
    }
    return entries;
  }();
  uint32_t crc = ~0u;
  for (uint8_t byte : bytes)
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

/// TFRecord's masked checksum: a CRC of data that holds CRCs is itself
/// rotated and offset.
static uint32_t maskedCrc(llvm::ArrayRef<uint8_t> bytes) {
  uint32_t crc = io::crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

static llvm::Error fileError(llvm::StringRef path, std::error_code error) {
  return llvm::createStringError(error, "cannot write %s: %s",
                                 path.str().c_str(), error.message().c_str());
}

llvm::Expected<std::unique_ptr<io::EventFileWriter>>
io::EventFileWriter::create(llvm::StringRef folder) {
  if (std::error_code error = llvm::sys::fs::create_directories(folder))
    return fileError(folder, error);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  llvm::SmallString<256> path(folder);
  llvm::sys::path::append(path,
                          llvm::formatv("events.out.tfevents.{0}.{1}.{2}",
                                        int64_t(wallTime()), host,
                                        llvm::sys::Process::getProcessId())
                              .str());
  std::error_code error;
  auto out = std::make_unique<llvm::raw_fd_ostream>(path, error);
  if (error)
    return fileError(path, error);
  std::unique_ptr<EventFileWriter> writer(
      new EventFileWriter(path.str().str(), std::move(out)));
  tensorboard::Event version;
  version.set_wall_time(wallTime());
  version.set_file_version("brain.Event:2");
  if (llvm::Error error = writer->write(version.SerializeAsString()))
    return std::move(error);
  return writer;
}

llvm::Error io::EventFileWriter::scalars(
    int64_t step, llvm::ArrayRef<std::pair<std::string, float>> scalars) {
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_step(step);
  for (const auto &[tag, value] : scalars) {
    tensorboard::Summary::Value &entry = *event.mutable_summary()->add_value();
    entry.set_tag(tag);
    entry.set_simple_value(value);
  }
  return write(event.SerializeAsString());
}

llvm::Error io::EventFileWriter::write(const std::string &event) {
  uint8_t length[8];
  llvm::support::endian::write64le(length, event.size());
  uint8_t lengthCrc[4], eventCrc[4];
  llvm::support::endian::write32le(lengthCrc, maskedCrc(length));
  llvm::support::endian::write32le(
      eventCrc,
      maskedCrc(llvm::ArrayRef(reinterpret_cast<const uint8_t *>(event.data()),
                               event.size())));
  out->write(reinterpret_cast<const char *>(length), sizeof length);
  out->write(reinterpret_cast<const char *>(lengthCrc), sizeof lengthCrc);
  *out << event;
  out->write(reinterpret_cast<const char *>(eventCrc), sizeof eventCrc);
  out->flush();
  if (!out->has_error())
    return llvm::Error::success();
  std::error_code error = out->error();
  out->clear_error();
  return fileError(filePath, error);
}
