//===- ReferenceCache.h - DPO's reference as a file keeps it ----*- C++ -*-===//
//
// A precomputed DPO reference (runtime/train/Reference.h) is kept in the
// output folder as JSON lines: a header naming the rows and base it was
// computed for (a fingerprint), how many rows, the model training started
// from (`start`: a starting adapter's), and a checksum of the lines after
// it; then each row's reference log-probabilities of its chosen and
// rejected sequences, `{"chosen": c, "rejected": r}`, every float's digits
// written, or `null` for a row the pass did not read (a run cut short by
// train.max_steps_per_epoch). A file made for other rows or another base,
// cut short, edited, malformed, or holding a value no log-probability
// takes, is no cache of these rows: its reader says why.
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

/// A row's reference log-probabilities (chosen, rejected); none where the
/// pass that kept them did not read the row.
using KeptPair = std::optional<std::array<float, 2>>;

/// What a kept reference holds: a pair (or none) for each row, and the
/// start it was computed from.
struct KeptReference {
  std::vector<KeptPair> values;
  uint64_t start = 0;
};

/// The text of a cache of `values` (a row's each) under `fingerprint`,
/// computed from `start`.
std::string printReferenceCache(llvm::ArrayRef<KeptPair> values,
                                uint64_t fingerprint, uint64_t start);

/// What the cache `text` holds for `rows` rows under `fingerprint`, or an
/// error saying why it holds nothing (another fingerprint, another count,
/// lines edited after it was written, a malformed line, a value that is no
/// log-probability: beyond float's range or above 0; naming the line).
llvm::Expected<KeptReference>
parseReferenceCache(llvm::StringRef text, int64_t rows, uint64_t fingerprint);

/// The most bytes a cache of `rows` rows takes (its header and a line of
/// every digit of two floats a row): what its reader reads at most.
uint64_t maxReferenceCacheBytes(int64_t rows);

} // namespace twill

#endif // TWILL_RUNTIME_DATA_REFERENCECACHE_H
