//===- Batch.h - one step's inputs from a JSON file -------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_BATCH_H
#define TWILL_RUNTIME_TRAIN_BATCH_H

#include "runtime/executable/Executable.h"

namespace twill {

/// Fills every input buffer of `executable` (tokens, labels, positions,
/// segments) from the JSON object in `path`, which maps each input's name
/// to rows of integers of the input's shape.
llvm::Error loadBatchJson(llvm::StringRef path, const Executable &executable,
                          BufferSet &buffers);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_BATCH_H
