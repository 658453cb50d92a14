//===- Sha256File.h - what a file holds, as a hash --------------*- C++ -*-===//

#ifndef TWILL_SUPPORT_SHA256FILE_H
#define TWILL_SUPPORT_SHA256FILE_H

#include "llvm/Support/Error.h"

#include <string>

namespace twill {

/// The SHA-256 of `bytes`, in lower-case hex.
std::string sha256Hex(llvm::StringRef bytes);

/// The SHA-256 of the file at `path`'s contents, in lower-case hex: what
/// identifies a twillc (its size and time do not: a rebuild or a copy may
/// keep both).
llvm::Expected<std::string> sha256OfFile(llvm::StringRef path);

} // namespace twill

#endif // TWILL_SUPPORT_SHA256FILE_H
