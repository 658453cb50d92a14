//===- TwillAsyncOps.cpp - collectives in flight --------------------------===//

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <map>

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
/// block. (What planned memory must keep while it is in flight is checked
/// for a whole block at once: verifyFlightsInPlannedMemory.)
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
  return success();
}

namespace {

/// Device memory a start holds until its wait: its input (read until then)
/// or its result (written until then).
struct Held {
  int64_t end;
  Operation *start;
  Value input; // null: the start's result
  int starts;  // how many starts in flight read this input
};

/// The memory held by the starts in flight of one block, by the offset each
/// range begins at. In a sound plan the ranges are disjoint (each is a live
/// value's), so one neighbour on each side is all an overlap query reads.
class InFlightMemory {
public:
  using Range = std::pair<int64_t, int64_t>;

  /// The held range that overlaps `range`, if any.
  const Held *overlapping(Range range) const {
    auto next = held.lower_bound(range.first);
    if (next != held.end() && next->first < range.second)
      return &next->second;
    if (next != held.begin() && std::prev(next)->second.end > range.first)
      return &std::prev(next)->second;
    return nullptr;
  }

  /// Holds `range` for `start` (its input `input`, or its result); fails,
  /// naming the start, over memory already held for something else.
  LogicalResult hold(Range range, Operation *start, Value input) {
    auto same = held.find(range.first);
    if (input && same != held.end() && same->second.input == input &&
        same->second.end == range.second) {
      ++same->second.starts; // one value read by two starts in flight
    } else if (const Held *other = overlapping(range)) {
      return start->emitOpError()
             << (input ? "reads an input" : "puts its result")
             << " in memory that " << other->start->getName() << " holds "
             << (other->input ? "(its input)" : "(its result)")
             << " until its wait";
    } else {
      held[range.first] = {range.second, start, input, 1};
    }
    byStart[start].push_back(range.first);
    return success();
  }

  /// The wait of `start`: what it held is free.
  void release(Operation *start) {
    for (int64_t begin : byStart.lookup(start)) {
      auto found = held.find(begin);
      if (found != held.end() && --found->second.starts == 0)
        held.erase(found);
    }
    byStart.erase(start);
  }

private:
  std::map<int64_t, Held> held;
  llvm::DenseMap<Operation *, SmallVector<int64_t, 2>> byStart;
};

} // namespace

/// One sweep of `block`: nothing a start holds is written before its wait.
static LogicalResult verifyFlights(Block &block) {
  InFlightMemory inFlight;
  for (Operation &op : block) {
    if (auto wait = dyn_cast<WaitOp>(op)) {
      // Its result is the start's, placed when the start was.
      if (Operation *start = wait.getHandle().getDefiningOp())
        inFlight.release(start);
      continue;
    }
    for (OpResult value : op.getResults()) {
      auto type = isa<PendingType>(value.getType())
                      ? collectiveResultType(&op)
                      : dyn_cast<RankedTensorType>(value.getType());
      auto range =
          type ? arenaRange(&op, value.getResultNumber(), type) : std::nullopt;
      const Held *held = range ? inFlight.overlapping(*range) : nullptr;
      if (!held)
        continue;
      return held->start->emitOpError()
             << "is in flight while " << op.getName() << " (result "
             << value.getResultNumber() << ") is written over its "
             << (held->input ? "input: the input's memory is read until the "
                               "wait"
                             : "result: the result's memory is written until "
                               "the wait");
    }
    if (!isAsyncStart(&op) || op.getNumOperands() != 1)
      continue;
    Value input = op.getOperand(0);
    auto inputType = dyn_cast<RankedTensorType>(input.getType());
    auto inputRange =
        inputType ? arenaRange(input.getDefiningOp(),
                               isa<OpResult>(input)
                                   ? cast<OpResult>(input).getResultNumber()
                                   : 0,
                               inputType)
                  : std::nullopt;
    if (inputRange && failed(inFlight.hold(*inputRange, &op, input)))
      return failure();
    auto result = arenaRange(&op, 0, collectiveResultType(&op));
    if (result && failed(inFlight.hold(*result, &op, Value())))
      return failure();
  }
  return success();
}

LogicalResult mlir::twill::verifyFlightsInPlannedMemory(Operation *planned) {
  WalkResult walk = planned->walk([](Block *block) {
    return failed(verifyFlights(*block)) ? WalkResult::interrupt()
                                         : WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult mlir::twill::verifyStartOperands(Operation *start) {
  Value input = start->getOperand(0);
  RankedTensorType result = collectiveResultType(start);
  if (elementTypeOf(input) != result.getElementType())
    return start->emitOpError()
           << "input and result must have one element type, got "
           << elementTypeOf(input) << " and " << result.getElementType();
  if (failed(verifyCollectiveDims(start)))
    return failure();
  return verifyStart(start);
}

LogicalResult AllReduceStartOp::verify() {
  if (getInput().getType() != getHandle().getType().getValue())
    return emitOpError("an all_reduce's result has its input's type");
  return verifyStartOperands(*this);
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
