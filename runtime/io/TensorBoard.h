//===- TensorBoard.h - scalars in a TensorBoard event file ------*- C++ -*-===//
//
// TensorBoard reads a run's figures from event files: TFRecords (a length,
// its masked CRC-32C, the record, its masked CRC-32C) each holding an Event
// protobuf (proto/tensorboard_event.proto). EventFileWriter writes one such
// file, events.out.tfevents.<seconds>.<host>, in a folder, a step's scalars
// at a time, flushed as they come so that a TensorBoard watching the folder
// sees the run live.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_IO_TENSORBOARD_H
#define TWILL_RUNTIME_IO_TENSORBOARD_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <utility>

namespace twill::io {

/// CRC-32C (Castagnoli), the checksum TFRecords carry.
uint32_t crc32c(llvm::ArrayRef<uint8_t> bytes);

class EventFileWriter {
public:
  /// A new event file in `folder` (made if missing).
  static llvm::Expected<std::unique_ptr<EventFileWriter>>
  create(llvm::StringRef folder);

  /// Appends one event of `scalars` (tag, value) at `step`, and flushes.
  llvm::Error scalars(int64_t step,
                      llvm::ArrayRef<std::pair<std::string, float>> scalars);

  const std::string &path() const { return filePath; }

private:
  EventFileWriter(std::string path, std::unique_ptr<llvm::raw_fd_ostream> out)
      : filePath(std::move(path)), out(std::move(out)) {}
  /// Frames `event` (a serialized Event) as a TFRecord.
  llvm::Error write(const std::string &event);

  std::string filePath;
  std::unique_ptr<llvm::raw_fd_ostream> out;
};

} // namespace twill::io

#endif // TWILL_RUNTIME_IO_TENSORBOARD_H
