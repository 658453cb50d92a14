//===- ShapeChecks.h - helpers of the op verifiers --------------*- C++ -*-===//
//
// Shared by the forward and gradient op verifiers: every check emits a
// diagnostic on the op naming the offending value and what was expected.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECTS_TWILL_SHAPECHECKS_H
#define TWILL_DIALECTS_TWILL_SHAPECHECKS_H

#include "mlir/IR/Operation.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace mlir::twill {

ArrayRef<int64_t> shapeOf(Value value);
/// The shape of an optional operand, if it is there.
std::optional<ArrayRef<int64_t>> shapeIfAny(Value value);
Type elementTypeOf(Value value);

/// Emits what a shape rule of opmodel/Shapes.h found wrong (if anything)
/// as the op's error: the runtime reports the same rule in the same words.
LogicalResult check(Operation *op, llvm::Error rule);

/// Fails unless every value has the element type of the first.
LogicalResult expectSameElementType(Operation *op, ValueRange values);
/// Attention's (and its gradient's) window, at least 1, and soft-cap,
/// positive, where given.
LogicalResult verifyAttentionLogits(Operation *op,
                                    std::optional<uint64_t> window,
                                    std::optional<llvm::APFloat> softcap);
/// dpo_loss's (and its gradient's) settings: a loss type of support/Dpo.h,
/// a positive beta, label smoothing in [0, 0.5).
LogicalResult verifyDpoSettings(Operation *op, StringRef lossType,
                                const llvm::APFloat &beta,
                                const llvm::APFloat &labelSmoothing);
// The verifiers of several ops each, which an op's ODS names (`verifier`);
// verifyShapeRule(op), by its shape rule, is declared in TwillOps.h.
/// A blocking collective: one element type, and the dims it names.
LogicalResult verifyBlocking(Operation *op);
/// A start's own operand checks, as its blocking collective's.
LogicalResult verifyStartOperands(Operation *start);

/// A soft-cap's cap: positive.
LogicalResult verifyCap(Operation *op, const llvm::APFloat &cap);
/// Rope scaling: linear (the factor alone) or Llama 3.1's (all four
/// attributes), in range; or none.
LogicalResult verifyRopeScaling(Operation *op,
                                std::optional<llvm::APFloat> factor,
                                std::optional<llvm::APFloat> lowFreqFactor,
                                std::optional<llvm::APFloat> highFreqFactor,
                                std::optional<uint64_t> originalMaxPosition);

} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_SHAPECHECKS_H
