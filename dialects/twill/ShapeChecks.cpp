//===- ShapeChecks.cpp - helpers of the op verifiers ----------------------===//

#include "dialects/twill/ShapeChecks.h"

#include "mlir/IR/BuiltinTypes.h"
#include "support/Dpo.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::twill;

LogicalResult mlir::twill::check(Operation *op, llvm::Error rule) {
  if (!rule)
    return success();
  return op->emitOpError() << llvm::toString(std::move(rule));
}

ArrayRef<int64_t> mlir::twill::shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

std::optional<ArrayRef<int64_t>> mlir::twill::shapeIfAny(Value value) {
  if (!value)
    return std::nullopt;
  return shapeOf(value);
}

Type mlir::twill::elementTypeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
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

LogicalResult
mlir::twill::verifyAttentionLogits(Operation *op,
                                   std::optional<uint64_t> window,
                                   std::optional<llvm::APFloat> softcap) {
  if (window && (int64_t)*window < 1)
    return op->emitOpError("window must be at least 1");
  if (softcap && !(softcap->convertToDouble() > 0))
    return op->emitOpError("softcap must be positive");
  return success();
}

LogicalResult
mlir::twill::verifyDpoSettings(Operation *op, StringRef lossType,
                               const llvm::APFloat &beta,
                               const llvm::APFloat &labelSmoothing) {
  ::twill::dpo::LossType type;
  if (!::twill::dpo::lossTypeNamed(lossType.str().c_str(), type))
    return op->emitOpError(
               "loss_type must be sigmoid, ipo, hinge or robust, got ")
           << lossType;
  double b = beta.convertToDouble(), e = labelSmoothing.convertToDouble();
  if (!(b > 0 && std::isfinite(b)))
    return op->emitOpError("beta must be positive, got ") << b;
  if (!(e >= 0 && e < 0.5))
    return op->emitOpError("label_smoothing must be in [0, 0.5), got ") << e;
  return success();
}

LogicalResult mlir::twill::verifyCap(Operation *op, const llvm::APFloat &cap) {
  if (!(cap.convertToDouble() > 0))
    return op->emitOpError("cap must be positive");
  return success();
}

LogicalResult
mlir::twill::verifyRopeScaling(Operation *op,
                               std::optional<llvm::APFloat> factor,
                               std::optional<llvm::APFloat> lowFreqFactor,
                               std::optional<llvm::APFloat> highFreqFactor,
                               std::optional<uint64_t> originalMaxPosition) {
  if (!factor && !lowFreqFactor && !highFreqFactor && !originalMaxPosition)
    return success();
  if (factor && factor->convertToDouble() < 1.0)
    return op->emitOpError("scaling_factor must be at least 1");
  // Linear scaling: the factor alone.
  if (factor && !lowFreqFactor && !highFreqFactor && !originalMaxPosition)
    return success();
  if (!factor || !lowFreqFactor || !highFreqFactor || !originalMaxPosition)
    return op->emitOpError("rope scaling needs scaling_factor alone "
                           "(linear), or scaling_factor, low_freq_factor, "
                           "high_freq_factor and original_max_position "
                           "together (llama3)");
  double low = lowFreqFactor->convertToDouble();
  if (low <= 0.0 || highFreqFactor->convertToDouble() <= low)
    return op->emitOpError(
        "rope scaling needs 0 < low_freq_factor < high_freq_factor");
  if ((int64_t)*originalMaxPosition <= 0)
    return op->emitOpError("original_max_position must be positive");
  return success();
}
