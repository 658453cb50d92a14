//===- Reference.h - DPO's precomputed reference ----------------*- C++ -*-===//
//
// Under dpo.reference PRECOMPUTED the steps read the reference model's
// log-probabilities of each row's chosen and rejected sequences instead of
// running the reference beside the policy. The reference is the model as
// training starts (TRL's): the program's @reference entry point computes
// them, a micro-batch at a time, in a first pass over the data before
// training; they are kept with the rows (Row::reference) and in a file of
// the output folder, which a later run on the same rows, base and start
// (and a resumed one, whose parameters have moved on) reads instead of
// computing them again.
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

/// Sets the reference log-probabilities of the rows `read` names
/// (ascending indices of `rows`: those the run reads): from `cache` where
/// it holds theirs under these rows and base, computed from `start` (what
/// the model starts from beyond its base: a starting adapter's
/// description; empty for a new one), else computed by @reference — and
/// written to `cache` by rank 0 (not kept where `cache` is empty). `log`
/// hears which, and how long it took. A `resumed` run computes nothing (its
/// parameters are no longer the model it started from) and reads the kept
/// pass whatever start it was computed from: a cache that holds none is an
/// error. A collective: every rank calls it with the same rows, and every
/// rank takes what rank 0 found.
llvm::Error precomputeReference(Program &program,
                                llvm::MutableArrayRef<Row> rows,
                                llvm::ArrayRef<int64_t> read,
                                llvm::StringRef cache, llvm::StringRef start,
                                bool resumed, llvm::raw_ostream &log);

/// Runs @reference on the batch the program's inputs hold and fills its
/// reference_logps input with the result: a single batch's reference, as
/// a step reads it (twill-train --eval --batch).
llvm::Error computeBatchReference(Program &program);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_REFERENCE_H
