//===- AtomicFile.h - files that are whole or absent ------------*- C++ -*-===//

#ifndef TWILL_SUPPORT_ATOMICFILE_H
#define TWILL_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/ArrayRef.h"
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

/// Fails, naming both, when the file a tool is to write at `output` (given
/// as `flag`) is one of the files it reads, by any path: writing it would
/// destroy it (`twillc job.textproto -o job.textproto` replaced the job).
llvm::Error checkNotAnInput(llvm::StringRef flag, llvm::StringRef output,
                            llvm::ArrayRef<llvm::StringRef> inputs);

/// Fails, naming both, when the folder a tool is to write at `output`
/// (given as `flag`) is the folder `input` that it reads (`what` it is),
/// or lies inside it, by any path (links, dots, folders not made yet):
/// writing there would replace what it reads, or mix with it.
llvm::Error checkNotInFolder(llvm::StringRef flag, llvm::StringRef output,
                             llvm::StringRef what, llvm::StringRef input);

} // namespace twill

#endif // TWILL_SUPPORT_ATOMICFILE_H
