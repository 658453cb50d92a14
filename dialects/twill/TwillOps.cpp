//===- TwillOps.cpp - mesh and forward ops --------------------------------===//
//
// Verifiers compare shapes and element types only: placements may differ
// between operands before partitioning, and a value's placement is checked
// against its mesh by verifyPlacementSymbols.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/TwillOps.h"

#include "dialects/twill/ShapeChecks.h"
#include "opmodel/Shapes.h"
#include "support/BlockedPieces.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cstdint>

using namespace mlir;
using namespace mlir::twill;
namespace shapes = ::twill::shapes;

#define GET_OP_CLASSES
#include "dialects/twill/TwillOps.cpp.inc"

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> MeshOp::getAxisSizes() {
  return llvm::map_to_vector(getShape(), [](Attribute size) {
    return cast<IntegerAttr>(size).getInt();
  });
}

LogicalResult MeshOp::verify() {
  if (getAxes().empty())
    return emitOpError("needs at least one axis");
  if (getAxes().size() != getShape().size())
    return emitOpError() << "has " << getAxes().size() << " axes but "
                         << getShape().size() << " sizes";
  llvm::StringSet<> seen;
  for (Attribute axis : getAxes()) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (name.empty())
      return emitOpError("axis names must not be empty");
    if (!seen.insert(name).second)
      return emitOpError() << "axis '" << name << "' appears twice";
  }
  for (int64_t size : getAxisSizes())
    if (size <= 0)
      return emitOpError() << "axis sizes must be positive, got " << size;
  if (std::optional<ArrayAttr> roles = getRoles()) {
    if (roles->size() != getAxes().size())
      return emitOpError() << "has " << getAxes().size() << " axes but "
                           << roles->size() << " roles";
    for (AxisRole role : {AxisRole::Data, AxisRole::Tensor})
      if (llvm::count_if(*roles, [&](Attribute attr) {
            return cast<AxisRoleAttr>(attr).getValue() == role;
          }) > 1)
        return emitOpError() << "gives two axes the role "
                             << stringifyAxisRole(role);
  }
  return success();
}

std::optional<AxisRole> MeshOp::roleOf(size_t index) {
  std::optional<ArrayAttr> roles = getRoles();
  if (!roles || index >= roles->size())
    return std::nullopt;
  return cast<AxisRoleAttr>((*roles)[index]).getValue();
}

std::optional<size_t> MeshOp::axisOf(AxisRole role) {
  for (size_t index = 0; index < getAxes().size(); ++index)
    if (roleOf(index) == role)
      return index;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  if (failed(expectSameElementType(*this, {getLhs(), getRhs(), getResult()})))
    return failure();
  llvm::Expected<shapes::MatmulDims> dims =
      shapes::matmul(shapeOf(getLhs()), shapeOf(getRhs()), shapeOf(getResult()),
                     getTransposeLhs(), getTransposeRhs());
  if (!dims)
    return check(*this, dims.takeError());
  if (getAddend() && getAddend().getType() != getResult().getType())
    return emitOpError("addend must have the result's type");
  return success();
}

LogicalResult GroupedMatmulOp::verify() {
  if (failed(
          expectSameElementType(*this, {getRows(), getWeight(), getResult()})))
    return failure();
  llvm::Expected<shapes::GroupedMatmulDims> dims = shapes::groupedMatmul(
      shapeOf(getRows()), shapeOf(getWeight()), shapeOf(getCounts()),
      shapeOf(getResult()), getTransposeRhs());
  return dims ? success() : check(*this, dims.takeError());
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyShapeRule(*this)))
    return failure();
  if (getEpsilon().convertToDouble() <= 0.0)
    return emitOpError("epsilon must be positive");
  return success();
}

LogicalResult RopeOp::verify() {
  if (failed(verifyShapeRule(*this)))
    return failure();
  if (getTheta().convertToDouble() <= 0.0)
    return emitOpError("theta must be positive");
  return verifyRopeScaling(*this, getScalingFactor(), getLowFreqFactor(),
                           getHighFreqFactor(), getOriginalMaxPosition());
}

LogicalResult SoftcapOp::verify() {
  if (failed(verifyShapeRule(*this)))
    return failure();
  return verifyCap(*this, getCap());
}

LogicalResult DequantizeNf4Op::verify() {
  return check(
      *this, shapes::dequantize(shapeOf(getCodes()), shapeOf(getAbsmax()),
                                shapeOf(getNested()), shapeOf(getOffset()),
                                shapeOf(getResult()), getBlockSize(),
                                getNestedBlockSize(), getRows(), getColumns()));
}

LogicalResult RoundToFp8Op::verify() {
  if (getBlockSize() <= 0)
    return emitOpError("block_size must be positive, got ") << getBlockSize();
  if (shapeOf(getInput()).empty())
    return emitOpError("rounds blocks of a last dim: the input has none");
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return check(*this, shapes::expectShape("result", shapeOf(getResult()),
                                          shapeOf(getInput())));
}

LogicalResult QuantizedMatmulOp::verify() {
  OperandRange parts = getParts();
  bool hasBlocks =
      getBlockSize() && getNestedBlockSize() && getRows() && getColumns();
  if (parts.size() != 4 && parts.size() != 2)
    return emitOpError("expects the four parts of an NF4 weight or the two "
                       "of an FP8 one, got ")
           << parts.size();
  if (isNf4() != hasBlocks || (!isNf4() && getShardAxis()))
    return emitOpError(isNf4() ? "an NF4 weight needs block_size, "
                                 "nested_block_size, rows and columns"
                               : "an FP8 weight takes no block attributes");
  // The weight the dequantize would form, in the lhs's dtype.
  SmallVector<int64_t> weight(shapeOf(parts[0]));
  if (weight.size() == 2 && isNf4())
    weight[1] *= 2;
  if (failed(check(*this,
                   isNf4() ? shapes::dequantize(
                                 shapeOf(parts[0]), shapeOf(parts[1]),
                                 shapeOf(parts[2]), shapeOf(parts[3]), weight,
                                 *getBlockSize(), *getNestedBlockSize(),
                                 *getRows(), *getColumns())
                           : shapes::dequantizeFp8(shapeOf(parts[0]),
                                                   shapeOf(parts[1]), weight))))
    return failure();
  if (failed(expectSameElementType(*this, {getLhs(), getResult()})))
    return failure();
  llvm::Expected<shapes::MatmulDims> dims =
      shapes::matmul(shapeOf(getLhs()), weight, shapeOf(getResult()),
                     /*transposeLhs=*/false, getTransposeRhs());
  if (!dims)
    return check(*this, dims.takeError());
  if (getAddend() && getAddend().getType() != getResult().getType())
    return emitOpError("addend must have the result's type");
  if (std::optional<int64_t> block = getLhsFp8BlockSize();
      block && (isNf4() || !getTransposeRhs() || *block <= 0))
    return emitOpError("lhs_fp8_block_size marks an FP8 weight's x W^T "
                       "(transpose_rhs) whose lhs is rounded in blocks of a "
                       "positive size");
  return success();
}

LogicalResult DpoLossOp::verify() {
  if (failed(verifyDpoSettings(*this, getLossType(), getBeta(),
                               getLabelSmoothing())))
    return failure();
  return check(*this,
               shapes::dpoLoss(shapeOf(getPolicy()), shapeOf(getReference()),
                               shapeOf(getTokens()), shapeOf(getMetrics())));
}

LogicalResult DropoutOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})) ||
      failed(check(*this, shapes::dropout(shapeOf(getInput()),
                                          shapeOf(getTokens()),
                                          shapeOf(getResult())))))
    return failure();
  double rate = getRate().convertToDouble();
  if (!(rate > 0.0 && rate < 1.0))
    return emitOpError() << "rate must be in (0, 1), got " << rate;
  // The getters are unsigned: a negative value reads as beyond 32 bits.
  if (getSeed() > UINT32_MAX || getStream() > UINT32_MAX)
    return emitOpError("seed and stream must be 32-bit unsigned values");
  if (!cast<RankedTensorType>(getTokens().getType()).getElementType()
           .isInteger(32))
    return emitOpError("tokens must be i32");
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(expectSameElementType(
          *this, {getQuery(), getKey(), getValue(), getResult()})) ||
      failed(check(*this, shapes::attention(
                              shapeOf(getQuery()), shapeOf(getKey()),
                              shapeOf(getValue()), shapeIfAny(getSegments()),
                              shapeOf(getResult()), shapeOf(getLogSumExp()),
                              bool(getShardAxis())))))
    return failure();
  if (getScale().convertToDouble() <= 0.0)
    return emitOpError("scale must be positive");
  return verifyAttentionLogits(*this, getWindow(), getSoftcap());
}

/// A loss op's sums and counts: scalars, or per row and sequence.
template <typename Op> static LogicalResult verifyLossSums(Op op) {
  std::optional<ArrayRef<int64_t>> sequences = shapeIfAny(op.getSequences());
  int64_t count = op.getSequenceCount().value_or(0);
  for (Value sums : {op.getLoss(), op.getCount()})
    if (failed(check(op, shapes::lossSums(shapeOf(op.getLabels()), sequences,
                                          count, shapeOf(sums)))))
      return failure();
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(check(*this, shapes::crossEntropy(shapeOf(getLogits()),
                                               shapeOf(getLabels())))))
    return failure();
  return verifyLossSums(*this);
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getWeight(), getTile()})))
    return failure();
  if (getSoftcap() && failed(verifyCap(*this, *getSoftcap())))
    return failure();
  if (failed(check(*this, shapes::tiledLogits(
                              shapeOf(getInput()), shapeOf(getWeight()),
                              shapeOf(getLabels()), shapeOf(getTile())))))
    return failure();
  return verifyLossSums(*this);
}

LogicalResult mlir::twill::verifyOnlyReloadsRead(Operation *op, Value host) {
  for (Operation *user : host.getUsers())
    if (!isa<ReloadOp, ReloadStartOp>(user))
      return op->emitOpError("result lives in host memory: only twill.reload "
                             "may read it, not ")
             << user->getName();
  return success();
}

LogicalResult OffloadOp::verify() {
  return verifyOnlyReloadsRead(*this, getResult());
}

LogicalResult ReloadOp::verify() {
  if (!inHostMemory(getInput()))
    return emitOpError("reads what a twill.offload made");
  return success();
}

/// `whole` cut along `dim` into `pieces` laid out in `blocks` blocks: one
/// element type, the shapes the layout's.
static LogicalResult verifyPieces(Operation *op, Value whole, ValueRange pieces,
                                  int64_t dim, int64_t blocks) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value piece : pieces) {
    if (failed(expectSameElementType(op, {whole, piece})))
      return failure();
    shapes.push_back(shapeOf(piece));
  }
  auto runs = ::twill::shapes::pieces(shapeOf(whole), shapes, dim, blocks);
  return check(op, runs.takeError());
}

LogicalResult SplitOp::verify() {
  return verifyPieces(*this, getInput(), getPieces(), getDim(), getBlocks());
}

LogicalResult ConcatOp::verify() {
  return verifyPieces(*this, getResult(), getPieces(), getDim(), getBlocks());
}

LogicalResult TransposeOp::verify() {
  if (failed(expectSameElementType(*this, {getInput(), getResult()})))
    return failure();
  return check(*this, shapes::transpose(shapeOf(getInput()), getPermutation(),
                                        shapeOf(getResult())));
}

LogicalResult CastOp::verify() {
  if (isa<FloatType>(elementTypeOf(getInput())) &&
      !isa<FloatType>(elementTypeOf(getResult())))
    return emitOpError("cannot cast floats to integers");
  return verifyShapeRule(*this);
}
