//===- Reference.h - DPO's precomputed reference -----------------*- C++
//-*-===//
//
// Under dpo.reference PRECOMPUTED the steps read the reference model's
// log-probabilities of each row's chosen and rejected sequences instead of
// running the reference (the base with every adapter off) beside the
// policy. The program's @reference entry point computes them, a
// micro-batch at a time, in a first pass over the data before training;
// they are kept with the rows (Row::reference) and in a file of the output
// folder, which a later run on the same rows and base (a resumed one)
// reads instead of computing them again.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_TRAIN_REFERENCE_H
#define TWILL_RUNTIME_TRAIN_REFERENCE_H

#include "runtime/data/TokenizedDataset.h"
#include "runtime/train/Program.h"
#include "llvm/Support/raw_ostream.h"

namespace twill {

/// The files of the output folder that keep the reference of the training
/// rows and of the evaluation rows.
inline constexpr llvm::StringLiteral kReferenceFile = "reference_logps.jsonl";
inline constexpr llvm::StringLiteral kEvalReferenceFile =
    "eval_reference_logps.jsonl";

/// Sets the reference log-probabilities of `rows`: of all of them where
/// `cache` holds those of these rows under this base, else of the rows
/// `read` names (ascending indices: those the run reads), computed by
/// @reference — and written to `cache` by rank 0 when they are all the
/// rows (not kept where `cache` is empty). `log` hears which, and how long
/// it took. With `keptOnly` (a resumed full fine-tune, whose weights are no
/// longer the reference's) nothing is computed: a cache that holds none is
/// an error. A collective: every rank calls it with the same rows, and
/// every rank takes what rank 0 found.
llvm::Error precomputeReference(Program &program,
                                llvm::MutableArrayRef<Row> rows,
                                llvm::ArrayRef<int64_t> read,
                                llvm::StringRef cache, llvm::raw_ostream &log,
                                bool keptOnly = false);

/// Runs @reference on the batch the program's inputs hold and fills its
/// reference_logps input with the result: a single batch's reference, as
/// a step reads it (twill-train --eval --batch).
llvm::Error computeBatchReference(Program &program);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_REFERENCE_H
