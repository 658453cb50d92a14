//===- InstructionKinds.h - every op an Executable can hold -----*- C++ -*-===//
//
// The one list of instruction kinds: the loader refuses an Executable with
// any other op, each backend must run every one of them, and
// twill-conformance must have a case for each (it fails otherwise). An op
// the compiler learns to emit is added here first.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_INSTRUCTIONKINDS_H
#define TWILL_RUNTIME_EXECUTABLE_INSTRUCTIONKINDS_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

namespace twill {

inline constexpr llvm::StringLiteral kInstructionKinds[] = {
    // The forward pass.
    "twill.embedding", "twill.matmul", "twill.rms_norm", "twill.rope",
    "twill.attention", "twill.add", "twill.mul", "twill.div", "twill.swiglu",
    "twill.scale", "twill.cross_entropy", "twill.reshape", "twill.transpose",
    "twill.cast", "twill.constant",
    // Gradients.
    "twill.embedding_grad", "twill.rms_norm_grad",
    "twill.rms_norm_weight_grad", "twill.rope_grad", "twill.attention_grad",
    "twill.swiglu_grad", "twill.cross_entropy_grad",
    // The optimizer step.
    "twill.global_norm", "twill.sum_squares", "twill.sqrt",
    "twill.clip_coefficient", "twill.lr_schedule", "twill.adamw",
    "twill.increment",
    // Collectives.
    "twill.all_gather", "twill.reduce_scatter", "twill.all_reduce",
    "twill.all_to_all", "twill.local_slice"};

inline bool isInstructionKind(llvm::StringRef op) {
  return llvm::is_contained(kInstructionKinds, op);
}

/// The kinds that move values between ranks (local_slice only slices).
inline bool isCollective(llvm::StringRef op) {
  return op == "twill.all_gather" || op == "twill.reduce_scatter" ||
         op == "twill.all_reduce" || op == "twill.all_to_all";
}

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_INSTRUCTIONKINDS_H
