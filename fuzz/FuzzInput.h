//===- FuzzInput.h - what every fuzz target shares ----------------*- C++ -*-===//
//
// The fuzz targets drive the product's own loaders, which read files: each
// input is written to a scratch folder of this process (made once, removed
// at exit) and read from there, as a user's file would be.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FUZZ_FUZZINPUT_H
#define TWILL_FUZZ_FUZZINPUT_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace twill::fuzz {

/// This process's scratch folder.
const std::string &scratchDir();

/// Writes `size` bytes at `data` to `name` in the scratch folder; returns
/// its path.
std::string writeFile(llvm::StringRef name, const uint8_t *data, size_t size);
inline std::string writeFile(llvm::StringRef name, llvm::StringRef text) {
  return writeFile(name, reinterpret_cast<const uint8_t *>(text.data()),
                   text.size());
}

/// The value of `result`, or null after dropping its error: a named error is
/// a loader doing its job; only crashes, sanitizer reports and hangs are
/// findings.
template <typename T> T *valueOrNull(llvm::Expected<T> &result) {
  if (result)
    return &*result;
  llvm::consumeError(result.takeError());
  return nullptr;
}
inline void ignore(llvm::Error error) { llvm::consumeError(std::move(error)); }

/// The complete byte-level vocabulary (each of the 256 bytes a token, in
/// tiktoken's format) written once to the scratch folder: a tokenizer for the
/// text data readers.
const std::string &byteTokenizerPath();

} // namespace twill::fuzz

#endif // TWILL_FUZZ_FUZZINPUT_H
