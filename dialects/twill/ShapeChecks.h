//===- ShapeChecks.h - helpers of the op verifiers --------------*- C++ -*-===//
//
// Shared by the forward and gradient op verifiers: every check emits a
// diagnostic on the op naming the offending value and what was expected.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECTS_TWILL_SHAPECHECKS_H
#define TWILL_DIALECTS_TWILL_SHAPECHECKS_H

#include "mlir/IR/Operation.h"

#include <optional>
#include <string>

namespace mlir::twill {

/// `[2, 4, 8]`, for diagnostics.
std::string shapeText(ArrayRef<int64_t> shape);
ArrayRef<int64_t> shapeOf(Value value);
Type elementTypeOf(Value value);

/// Fails with "<what> must have shape [..], got [..]" unless they match.
LogicalResult expectShape(Operation *op, StringRef what,
                          ArrayRef<int64_t> actual, ArrayRef<int64_t> expected);
/// Fails unless every value has the element type of the first.
LogicalResult expectSameElementType(Operation *op, ValueRange values);
LogicalResult expectRank(Operation *op, StringRef what, Value value,
                         int64_t rank);
/// Llama 3.1 rope scaling: all four attributes or none, in range.
LogicalResult verifyRopeScaling(Operation *op,
                                std::optional<llvm::APFloat> factor,
                                std::optional<llvm::APFloat> lowFreqFactor,
                                std::optional<llvm::APFloat> highFreqFactor,
                                std::optional<uint64_t> originalMaxPosition);
/// Grouped-query attention: every key/value head serves a whole number of
/// query heads. With `queryHeadsSharded` (the query heads are one rank's
/// block, the key/value heads all of them) either count may divide the other.
LogicalResult verifyHeadGroups(Operation *op, int64_t queryHeads,
                               int64_t kvHeads, bool queryHeadsSharded);
/// linear_cross_entropy and its gradient: `input [..., hidden]`, `weight
/// [vocab, hidden]`, `labels [...]` and a `tile [rows, vocab]` of at least
/// one row, all floats of one type.
LogicalResult verifyTiledLogits(Operation *op, Value input, Value weight,
                                Value labels, Value tile);

} // namespace mlir::twill

#endif // TWILL_DIALECTS_TWILL_SHAPECHECKS_H
