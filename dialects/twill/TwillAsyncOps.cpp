//===- TwillAsyncOps.cpp - collectives in flight --------------------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::twill;

#define GET_TYPEDEF_CLASSES
#include "dialects/twill/TwillTypes.cpp.inc"

void TwillDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/twill/TwillTypes.cpp.inc"
      >();
}

RankedTensorType mlir::twill::collectiveResultType(Operation *op) {
  Type type = op->getResult(0).getType();
  if (auto pending = dyn_cast<PendingType>(type))
    return pending.getValue();
  return cast<RankedTensorType>(type);
}

/// The device arena range [offset, offset + bytes) of `value`, if it has
/// one (an offload's result is in the host arena).
static std::optional<std::pair<int64_t, int64_t>>
arenaRange(Operation *op, unsigned result, RankedTensorType type) {
  if (op && inHostMemory(op->getResult(result)))
    return std::nullopt;
  auto offsets =
      op ? op->getAttrOfType<DenseI64ArrayAttr>(kArenaOffsetsAttrName)
         : DenseI64ArrayAttr();
  if (!offsets || (int64_t)result >= offsets.size() || offsets[result] < 0)
    return std::nullopt;
  return std::pair(offsets[result], offsets[result] + arenaBytesOf(type));
}

/// The schedule rules of a start: its handle waited exactly once, in its
/// block; and, once the memory is planned (the start carries the offset of
/// the result in flight), nothing computed between the start and its wait
/// lies over the collective's input or its result.
static LogicalResult verifyStart(Operation *start) {
  Value handle = start->getResult(0);
  auto uses = llvm::to_vector(handle.getUsers());
  if (uses.empty())
    return start->emitOpError("is never waited: every start needs one "
                              "twill.wait");
  if (uses.size() > 1)
    return start->emitOpError()
           << "is waited " << uses.size() << " times: a collective ends once";
  auto wait = dyn_cast<WaitOp>(uses.front());
  if (!wait)
    return start->emitOpError()
           << "hands its handle to " << uses.front()->getName()
           << ": only twill.wait may take it";
  if (wait->getBlock() != start->getBlock())
    return start->emitOpError("is waited outside the block that starts it: "
                              "the wait must be on every path");
  if (!start->hasAttr(kArenaOffsetsAttrName))
    return success(); // not planned yet
  auto result = arenaRange(start, 0, collectiveResultType(start));
  Value input = start->getOperand(0);
  auto inputRange = arenaRange(
      input.getDefiningOp(),
      isa<OpResult>(input) ? cast<OpResult>(input).getResultNumber() : 0,
      cast<RankedTensorType>(input.getType()));
  for (Operation *op = start->getNextNode(); op && op != wait.getOperation();
       op = op->getNextNode())
    for (OpResult value : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(value.getType());
      auto range =
          type ? arenaRange(op, value.getResultNumber(), type) : std::nullopt;
      if (!range)
        continue;
      auto overlaps = [&](std::pair<int64_t, int64_t> other) {
        return range->first < other.second && other.first < range->second;
      };
      if (inputRange && overlaps(*inputRange))
        return start->emitOpError()
               << "is in flight while " << op->getName() << " (result "
               << value.getResultNumber()
               << ") is written over its input: the input's memory is "
                  "read until the wait";
      if (result && overlaps(*result))
        return start->emitOpError()
               << "is in flight while " << op->getName() << " (result "
               << value.getResultNumber()
               << ") is written over its result: the result's memory is "
                  "written until the wait";
    }
  return success();
}

/// The start's own operand checks, as its blocking collective's.
static LogicalResult verifyStartOperands(Operation *start,
                                         ArrayRef<StringRef> dims) {
  Value input = start->getOperand(0);
  RankedTensorType result = collectiveResultType(start);
  if (elementTypeOf(input) != result.getElementType())
    return start->emitOpError()
           << "input and result must have one element type, got "
           << elementTypeOf(input) << " and " << result.getElementType();
  for (StringRef name : dims) {
    int64_t dim = start->getAttrOfType<IntegerAttr>(name).getInt();
    if (dim < 0 || dim >= (int64_t)shapeOf(input).size())
      return start->emitOpError() << name << " " << dim << " is not a dim of a "
                                  << shapeOf(input).size() << "-d tensor";
  }
  return verifyStart(start);
}

LogicalResult AllGatherStartOp::verify() {
  return verifyStartOperands(*this, {"dim"});
}
LogicalResult ReduceScatterStartOp::verify() {
  return verifyStartOperands(*this, {"dim"});
}
LogicalResult AllReduceStartOp::verify() {
  if (getInput().getType() != getHandle().getType().getValue())
    return emitOpError("an all_reduce's result has its input's type");
  return verifyStartOperands(*this, {});
}
LogicalResult AllToAllStartOp::verify() {
  return verifyStartOperands(*this, {"split_dim", "concat_dim"});
}

/// A copy's start: its wait yields a value of its input's type.
static LogicalResult verifyTransferStart(Operation *start) {
  if (start->getOperand(0).getType() != collectiveResultType(start))
    return start->emitOpError("a copy's result has its input's type");
  return verifyStart(start);
}

LogicalResult OffloadStartOp::verify() {
  if (failed(verifyTransferStart(*this)))
    return failure();
  for (Operation *wait : getHandle().getUsers())
    if (failed(verifyOnlyReloadsRead(*this, wait->getResult(0))))
      return failure();
  return success();
}

LogicalResult ReloadStartOp::verify() {
  if (!inHostMemory(getInput()))
    return emitOpError("reads what a twill.offload made");
  return verifyTransferStart(*this);
}
