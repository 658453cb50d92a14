//===- ReferenceCache.h - DPO's reference as a file keeps it ----*- C++ -*-===//
//
// A precomputed DPO reference (runtime/train/Reference.h) is kept in the
// output folder as JSON lines: a header naming the rows and base it was
// computed for (a fingerprint) and how many rows, then each row's
// reference log-probabilities of its chosen and rejected sequences,
// `{"chosen": c, "rejected": r}`, every float's digits written. A file
// made for other rows or another base, cut short or malformed, is no
// cache of these rows: its reader says why, and the pass runs again.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_DATA_REFERENCECACHE_H
#define TWILL_RUNTIME_DATA_REFERENCECACHE_H

#include "runtime/data/TokenizedDataset.h"

#include <string>

namespace twill {

/// The fingerprint of `rows` (their tokens, labels, positions and
/// segments) under `base`, which says what the reference is computed with
/// (the model, how its weights are held, where they came from).
uint64_t referenceFingerprint(llvm::ArrayRef<Row> rows, llvm::StringRef base);

/// The text of a cache of `values` (a row's each) under `fingerprint`.
std::string printReferenceCache(llvm::ArrayRef<std::array<float, 2>> values,
                                uint64_t fingerprint);

/// The values the cache `text` holds for `rows` rows under `fingerprint`,
/// or an error saying why it holds none (another fingerprint, another
/// count, a malformed line or a value no float holds, naming the line).
llvm::Expected<std::vector<std::array<float, 2>>>
parseReferenceCache(llvm::StringRef text, int64_t rows, uint64_t fingerprint);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_REFERENCECACHE_H
