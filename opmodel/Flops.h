//===- Flops.h - the floating-point operations of an op ---------*- C++ -*-===//
//
// The one FLOP model of an op, from its instruction (its kind and
// attributes, as the Executable holds them) and its operands' shapes:
// twillc's cost estimate (passes/ResourceReport.cpp, over the IR's ops
// described as instructions) and the runtime's profiler (over the
// Executable's) both count by it, so what the plan predicts and what the
// profile measures are rated alike. MLIR-free: the runtime links it too.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_OPMODEL_FLOPS_H
#define TWILL_OPMODEL_FLOPS_H

#include "proto/executable.pb.h"

#include "llvm/ADT/ArrayRef.h"

namespace twill {

/// The floating-point operations of `instruction` whose operands have
/// `operandShapes` and whose first result has `resultShape`: 2mnk per
/// matmul product; causal attention 2·B·H·S²·D forward (half of each of its
/// two products' 2·B·H·S²·D; with a window W < S, 4·B·H·D·(S·W − W²/2))
/// and 2.5 times that backward (its gradient's
/// four products and the recomputed scores); a linear cross-entropy's
/// logits product, and in its gradient that and the product that uses
/// them; 0 for the rest, whose cost is the bytes they move.
double flopsOf(const Instruction &instruction,
               llvm::ArrayRef<llvm::ArrayRef<int64_t>> operandShapes,
               llvm::ArrayRef<int64_t> resultShape);

} // namespace twill

#endif // TWILL_OPMODEL_FLOPS_H
