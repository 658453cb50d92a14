//===- ShapeChecks.cpp - helpers of the op verifiers ----------------------===//

#include "dialects/twill/ShapeChecks.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::twill;

std::string mlir::twill::shapeText(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

ArrayRef<int64_t> mlir::twill::shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

Type mlir::twill::elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

LogicalResult mlir::twill::expectShape(Operation *op, StringRef what,
                                       ArrayRef<int64_t> actual,
                                       ArrayRef<int64_t> expected) {
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " must have shape " << shapeText(expected)
                           << ", got " << shapeText(actual);
}

LogicalResult mlir::twill::expectSameElementType(Operation *op,
                                                 ValueRange values) {
  Type expected = elementTypeOf(values.front());
  for (Value value : values.drop_front())
    if (elementTypeOf(value) != expected)
      return op->emitOpError() << "expects one element type, got " << expected
                               << " and " << elementTypeOf(value);
  return success();
}

LogicalResult mlir::twill::expectRank(Operation *op, StringRef what,
                                      Value value, int64_t rank) {
  if ((int64_t)shapeOf(value).size() == rank)
    return success();
  return op->emitOpError() << what << " must have rank " << rank << ", got "
                           << shapeOf(value).size();
}

LogicalResult
mlir::twill::verifyRopeScaling(Operation *op,
                               std::optional<llvm::APFloat> factor,
                               std::optional<llvm::APFloat> lowFreqFactor,
                               std::optional<llvm::APFloat> highFreqFactor,
                               std::optional<uint64_t> originalMaxPosition) {
  if (!factor && !lowFreqFactor && !highFreqFactor && !originalMaxPosition)
    return success();
  if (!factor || !lowFreqFactor || !highFreqFactor || !originalMaxPosition)
    return op->emitOpError("rope scaling needs scaling_factor, "
                           "low_freq_factor, high_freq_factor and "
                           "original_max_position together");
  if (factor->convertToDouble() < 1.0)
    return op->emitOpError("scaling_factor must be at least 1");
  double low = lowFreqFactor->convertToDouble();
  if (low <= 0.0 || highFreqFactor->convertToDouble() <= low)
    return op->emitOpError(
        "rope scaling needs 0 < low_freq_factor < high_freq_factor");
  if ((int64_t)*originalMaxPosition <= 0)
    return op->emitOpError("original_max_position must be positive");
  return success();
}

LogicalResult mlir::twill::verifyHeadGroups(Operation *op, int64_t queryHeads,
                                            int64_t kvHeads,
                                            bool queryHeadsSharded) {
  if (kvHeads > 0 && queryHeads % kvHeads == 0)
    return success();
  if (queryHeadsSharded && queryHeads > 0 && kvHeads % queryHeads == 0)
    return success();
  return op->emitOpError() << "query heads (" << queryHeads
                           << ") must be a multiple of key/value heads ("
                           << kvHeads << ")";
}

LogicalResult mlir::twill::verifyTiledLogits(Operation *op, Value input,
                                             Value weight, Value labels,
                                             Value tile) {
  if (failed(expectSameElementType(op, {input, weight, tile})) ||
      failed(expectRank(op, "weight", weight, 2)) ||
      failed(expectRank(op, "tile", tile, 2)))
    return failure();
  ArrayRef<int64_t> in = shapeOf(input), w = shapeOf(weight);
  if (in.empty())
    return op->emitOpError("input must have a hidden dim");
  if (failed(expectShape(op, "labels", shapeOf(labels), in.drop_back())) ||
      failed(expectShape(op, "weight", w, {w[0], in.back()})))
    return failure();
  ArrayRef<int64_t> rows = shapeOf(tile);
  if (rows[0] < 1)
    return op->emitOpError("tile must hold at least one row");
  return expectShape(op, "tile", rows, {rows[0], w[0]});
}
