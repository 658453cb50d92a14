//===- AtomicFile.h - files that are whole or absent ------------*- C++ -*-===//

#ifndef TWILL_SUPPORT_ATOMICFILE_H
#define TWILL_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace twill {

/// Writes `path` through a temporary file beside it that `write` fills and
/// that is renamed into place only once complete, so a crash or a full disk
/// never leaves a half-written file under `path`. Every file Twill writes
/// (programs, adapters, checkpoints, models) is written so.
llvm::Error
writeFileAtomically(llvm::StringRef path,
                    llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace twill

#endif // TWILL_SUPPORT_ATOMICFILE_H
