//===- PlanMemory.cpp - the twill-plan-memory pass ------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillDialect.h"
#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>

namespace mlir::twill {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// First-fit allocation in an arena that grows as needed, with freed blocks
/// merged with their free neighbours.
class Arena {
public:
  int64_t allocate(int64_t bytes) {
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= bytes) {
        int64_t offset = it->first, left = it->second - bytes;
        free.erase(it);
        if (left)
          free[offset + bytes] = left;
        return offset;
      }
    int64_t offset = end;
    end += bytes;
    high = std::max(high, end);
    return offset;
  }
  void release(int64_t offset, int64_t bytes) {
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == offset) {
        offset = previous->first;
        bytes += previous->second;
        free.erase(previous);
      }
    }
    if (offset + bytes == end)
      end = offset; // the top of the arena is free again
    else
      free[offset] = bytes;
  }
  int64_t highWater() const { return high; }

private:
  std::map<int64_t, int64_t> free; // offset -> size
  int64_t end = 0, high = 0;
};

/// A value's bytes in the arena.
int64_t arenaBytesOf(Value value) {
  return mlir::twill::arenaBytesOf(cast<RankedTensorType>(value.getType()));
}

/// The operand whose memory `op`'s result may take: a matmul's (or a
/// quantized matmul's) addend that it reads for the last time and not
/// also as another operand. The GEMMs read each element of the addend
/// before they write that element of the result (beta = 1), so computing
/// in place saves copying the addend over.
Value inPlaceOperand(Operation &op,
                     const llvm::DenseMap<Value, Operation *> &lastUse) {
  Value addend;
  if (auto matmul = dyn_cast<MatmulOp>(op))
    addend = matmul.getAddend();
  else if (auto quantized = dyn_cast<QuantizedMatmulOp>(op))
    addend = quantized.getAddend();
  if (!addend || lastUse.lookup(addend) != &op ||
      llvm::count(op.getOperands(), addend) != 1)
    return {};
  return addend;
}

/// Whether `op` may write `result`, the new value of parameter or state
/// `state`, over `state`'s own buffer: an op that computes element by
/// element (reading each before writing it), or a matmul over its addend
/// (the GEMM reads C before it writes D), reading `state` for the last
/// time.
bool writesInPlace(Operation &op, BlockArgument state,
                   const llvm::DenseMap<Value, Operation *> &lastUse) {
  auto matmul = dyn_cast<MatmulOp>(op);
  bool elementwise = op.hasTrait<OpTrait::twill::ElementwiseInPlace>() ||
                     (matmul && matmul.getAddend() == state &&
                      llvm::count(op.getOperands(), Value(state)) == 1);
  Operation *last = lastUse.lookup(state);
  return elementwise && (!last || last == &op || last->isBeforeInBlock(&op));
}

/// What a wait reads besides its handle: the input of its collective, in
/// flight until the wait.
Value inFlightInput(Operation &op) {
  auto wait = dyn_cast<WaitOp>(op);
  return wait ? wait.getHandle().getDefiningOp()->getOperand(0) : Value();
}

/// The high water marks of an entry point's arenas.
struct ArenaBytes {
  int64_t device = 0, host = 0;
};

/// Plans one entry point in empty arenas: its values on the device, and
/// the values it offloads (twill.offload's results, and offload_start's in
/// flight) on the host.
ArenaBytes planFunction(func::FuncOp function) {
  Block &body = function.getBody().front();
  // Values that keep memory of their own: what is returned, and what the
  // host reads after the run. (Arguments are never planned.)
  llvm::DenseSet<Value> kept;
  llvm::DenseMap<Value, Operation *> lastUse;
  // The returned new values of parameters and states, by their arguments.
  llvm::DenseMap<Value, BlockArgument> updates;
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op)) {
      kept.insert(op.getOperands().begin(), op.getOperands().end());
      for (auto [value, state] :
           llvm::zip_equal(op.getOperands(), updatedArguments(function)))
        if (state && !isa<BlockArgument>(value) &&
            cast<RankedTensorType>(value.getType()) == state.getType())
          updates[value] = state;
    }
    if (op.hasAttr(kHostReadAttrName))
      kept.insert(op.getResults().begin(), op.getResults().end());
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;
    if (Value input = inFlightInput(op))
      lastUse[input] = &op;
  }
  Builder builder(function.getContext());
  Arena arena, hostArena;
  auto arenaOf = [&](Value value) -> Arena & {
    return inHostMemory(value) ? hostArena : arena;
  };
  llvm::DenseMap<Value, int64_t> offsets;
  // The memory of each collective in flight, by handle: taken at its start
  // (it is written until the wait), its wait's result from then on.
  llvm::DenseMap<Value, int64_t> inFlight;
  for (Operation &op : body) {
    if (op.getNumResults() == 0)
      continue;
    // Results first, then the operands read for the last time go: a
    // result never shares memory with its own operands, but for a matmul
    // that computes in place over its addend. A start places the result
    // in flight (its handle has no memory of its own); its wait keeps it.
    SmallVector<int64_t> placed;
    Value inPlace = inPlaceOperand(op, lastUse);
    for (Value result : op.getResults()) {
      int64_t offset = -1;
      if (auto wait = dyn_cast<WaitOp>(op)) {
        offset = inFlight.at(wait.getHandle());
        if (offset >= 0)
          offsets[result] = offset;
      } else if (auto pending = dyn_cast<PendingType>(result.getType())) {
        auto wait = cast<WaitOp>(*result.getUsers().begin());
        offset = kept.contains(wait.getResult()) || kept.contains(result)
                     ? -1
                     : arenaOf(result).allocate(arenaBytesOf(wait.getResult()));
        inFlight[result] = offset;
      } else if (BlockArgument state = updates.lookup(result);
                 state && writesInPlace(op, state, lastUse)) {
        offset = kInPlaceOffset;
      } else if (!kept.contains(result)) {
        auto operand = inPlace ? offsets.find(inPlace) : offsets.end();
        if (operand != offsets.end()) { // the result takes its memory
          offset = operand->second;
          offsets.erase(operand);
        } else {
          offset = arenaOf(result).allocate(arenaBytesOf(result));
        }
        offsets[result] = offset;
      }
      placed.push_back(offset);
    }
    op.setAttr(kArenaOffsetsAttrName, builder.getDenseI64ArrayAttr(placed));
    auto release = [&](Value value) {
      auto found = offsets.find(value); // once, if an op reads it twice
      if (found != offsets.end()) {
        arenaOf(value).release(found->second, arenaBytesOf(value));
        offsets.erase(found);
      }
    };
    SmallVector<Value> read(op.getOperands());
    if (Value input = inFlightInput(op))
      read.push_back(input);
    for (Value operand : read)
      if (lastUse.lookup(operand) == &op)
        release(operand);
    for (Value result : op.getResults())
      if (!lastUse.count(result)) // never read
        release(result);
  }
  return {arena.highWater(), hostArena.highWater()};
}

struct PlanMemoryPass
    : public mlir::twill::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ArenaBytes most;
    for (auto function : module.getOps<func::FuncOp>()) {
      if (!function.getBody().hasOneBlock()) {
        function.emitError("twill-plan-memory needs one block per function");
        return signalPassFailure();
      }
      ArenaBytes bytes = planFunction(function);
      most.device = std::max(most.device, bytes.device);
      most.host = std::max(most.host, bytes.host);
    }
    Builder builder(module.getContext());
    module->setAttr(kArenaBytesAttrName, builder.getI64IntegerAttr(most.device));
    if (most.host)
      module->setAttr(kHostArenaBytesAttrName,
                      builder.getI64IntegerAttr(most.host));
  }
};

} // namespace
