//===- ReadFile.h - reading a file Twill did not write ----------*- C++ -*-===//
//
// Every file read whole goes through here: a FIFO or a device (/dev/zero)
// would be read without end or block forever, and a file bigger than its
// kind can be would ask the allocator for all of it; both are errors that
// name the file instead.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_READFILE_H
#define TWILL_SUPPORT_READFILE_H

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace twill {

/// What a file of each kind may hold at most.
inline constexpr uint64_t kMaxConfigBytes = uint64_t(64) << 20;   // 64 MiB
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t(1) << 30; // 1 GiB
inline constexpr uint64_t kMaxDataBytes = uint64_t(1) << 40;      // 1 TiB
/// One JSONL line is one example: far more text than any sequence holds.
inline constexpr uint64_t kMaxJsonLineBytes = uint64_t(16) << 20; // 16 MiB

/// Why a path is no file to read: a FIFO blocks the read forever, a
/// device never ends it.
inline constexpr const char *kNotRegularFile =
    "it is not a regular file (a directory, a device or a FIFO)";

/// Whether `path` exists and is not a regular file (kNotRegularFile); one
/// that does not exist is left to the open that follows to name.
bool existsButIsNotRegular(llvm::StringRef path);

/// The contents of the regular file `path` (memory-mapped where it is
/// large), or an error naming it ("cannot read <kind> <path>: ..."): it
/// cannot be read, is no regular file, or holds more than `maxBytes`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFile(llvm::StringRef path, uint64_t maxBytes,
                llvm::StringRef kind = "");

} // namespace twill

#endif // TWILL_SUPPORT_READFILE_H
