//===- Schedule.cpp - the twill-schedule pass -----------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace mlir::twill {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// The start of `collective`: the same operands and attributes, a handle
/// to the tensor it returns.
Operation *createStart(OpBuilder &builder, Operation *collective) {
  StringRef name = collective->getName().getStringRef();
  OperationState state(collective->getLoc(), (name + "_start").str());
  state.addOperands(collective->getOperands());
  state.addAttributes(collective->getAttrs());
  state.addTypes(PendingType::get(
      builder.getContext(),
      cast<RankedTensorType>(collective->getResult(0).getType())));
  return builder.create(state);
}

/// The op after which `collective` may start: after its input is made,
/// after `notBefore` if that comes between the two, and no earlier than
/// the beginning of the layer `prefetch` layers before its own in program
/// order (a collective outside every layer counts from the layer before
/// it). Null: the top of the block.
Operation *startPoint(Operation *collective, int64_t prefetch,
                      Operation *notBefore) {
  Operation *input = collective->getOperand(0).getDefiningOp();
  std::optional<int64_t> current = layerOf(collective);
  int64_t changes = 0;
  for (Operation *op = collective->getPrevNode(); op != input;
       op = op->getPrevNode()) {
    if (op == notBefore)
      return op;
    std::optional<int64_t> layer = layerOf(op);
    if (!layer || layer == current)
      continue;
    if (++changes > prefetch)
      return op; // the end of the layer before the one it may overlap
    current = layer;
  }
  return input;
}

/// Moves `wait` right before `start` unless it is already before it: the
/// walk back from `start` meets the wait first, or else the start it waits
/// for.
void moveBeforeIfAfter(WaitOp wait, Operation *start) {
  Operation *handle = wait.getHandle().getDefiningOp();
  for (Operation *op = start->getPrevNode(); op; op = op->getPrevNode()) {
    if (op == wait)
      return;
    if (op == handle) {
      wait->moveBefore(start);
      return;
    }
  }
}

/// Whether every reader of `value` only feeds the function's results (and
/// can therefore move to the end of the block with the wait).
bool readersOnlyFeedResults(Value value) {
  for (Operation *reader : value.getUsers()) {
    if (isa<func::ReturnOp>(reader) || !isPure(reader))
      return false;
    for (Operation *next : reader->getUsers())
      if (!isa<func::ReturnOp>(next))
        return false;
  }
  return true;
}

/// The split whose piece a collective (or its start) moves, if any.
SplitOp splitOf(Operation *collective) {
  return collective->getOperand(0).getDefiningOp<SplitOp>();
}

/// Moves the ops after `wait` that do not depend on it up before it, so
/// they run while its collective is in flight: a tensor-parallel gather of
/// the sequence-parallel activations is read by the base matmul at once,
/// but the LoRA A product (which reads the local rows) and its own small
/// gather need not wait for it. Computing ops, starts and waits may move;
/// the search ends at the first op of another layer, of the next tile
/// (the start of a gather of a split's piece: a tiling holds at most two
/// tiles, and each walk stays within one tile, so that a layer of many
/// tiles is scheduled in time linear in its size), or at a copy's start
/// (copies keep their order, one at a time). Each op computes what it
/// computed before, so the losses do not change.
void hoistIndependentWork(WaitOp wait) {
  llvm::SmallPtrSet<Operation *, 32> staying = {wait};
  std::optional<int64_t> layer = layerOf(wait);
  for (Operation *op = wait->getNextNode(), *next; op; op = next) {
    next = op->getNextNode();
    if (op->hasTrait<OpTrait::IsTerminator>() || layerOf(op) != layer ||
        (isAsyncStart(op) && splitOf(op)) ||
        isa<OffloadStartOp, ReloadStartOp>(op))
      return;
    bool movable = isPure(op) || isa<WaitOp>(op) || isAsyncStart(op);
    bool dependent = llvm::any_of(op->getOperands(), [&](Value operand) {
      Operation *definer = operand.getDefiningOp();
      return definer && staying.contains(definer);
    });
    if (movable && !dependent)
      op->moveBefore(wait);
    else
      staying.insert(op);
  }
}

/// The tiling a collective moves a tile of: the split whose piece it
/// gathers, or the concat that alone reads its result (a tile's partial
/// sum scattered); null for others.
std::pair<SplitOp, ConcatOp> tilingOf(Operation *collective) {
  SplitOp split = splitOf(collective);
  Value result = collective->getResult(0);
  ConcatOp concat = result.hasOneUse()
                        ? dyn_cast<ConcatOp>(*result.getUsers().begin())
                        : ConcatOp();
  return {split, concat};
}

void schedule(func::FuncOp function, int64_t prefetch) {
  Block &body = function.getBody().front();
  SmallVector<Operation *> collectives;
  for (Operation &op : body)
    if (hasStartOp(&op))
      collectives.push_back(&op);
  // A tiling's collectives overlap the tiles' compute without holding more
  // than two tiles: a piece's gather starts once the previous piece's is
  // waited, and a tile's scatter is waited before the next one starts.
  DenseMap<Operation *, WaitOp> lastWaitOfTiling;
  // Copies to and from host memory run one at a time, each started once
  // the previous one is waited: an offload where it was (after its input's
  // last forward reader; its only reader is its reload, in the backward),
  // so that its input's device memory is free again by the next copy; a
  // reload at most prefetch_layers ahead of its reader (the next layer's
  // input comes back while this layer's backward runs).
  WaitOp lastCopyWait;
  for (Operation *collective : collectives) {
    Value result = collective->getResult(0);
    if (result.use_empty())
      continue;
    auto [split, concat] = tilingOf(collective);
    bool copy = isa<OffloadOp, ReloadOp>(collective);
    Operation *notBefore = split  ? lastWaitOfTiling.lookup(split)
                           : copy ? lastCopyWait.getOperation()
                                  : nullptr;
    Operation *after = isa<OffloadOp>(collective)
                           ? collective->getPrevNode()
                           : startPoint(collective, prefetch, notBefore);
    // Starts placed at one point keep their program order.
    Operation *next = after ? after->getNextNode() : &body.front();
    while (isAsyncStart(next))
      next = next->getNextNode();
    OpBuilder builder(next);
    Operation *start = createStart(builder, collective);
    if (WaitOp previous = concat ? lastWaitOfTiling.lookup(concat) : WaitOp())
      moveBeforeIfAfter(previous, start);
    if (copy && lastCopyWait)
      moveBeforeIfAfter(lastCopyWait, start);

    // The wait: before the first reader, or at the end with readers that
    // only make the function's results. (Walks, not isBeforeInBlock: each
    // start and wait inserted may renumber the whole block; a result read
    // once, as most are, needs no walk: a tile's partial sum is read by
    // the concat after every tile.)
    Operation *firstReader = collective->getNextNode();
    if (result.hasOneUse())
      firstReader = *result.getUsers().begin();
    while (!llvm::is_contained(firstReader->getOperands(), result))
      firstReader = firstReader->getNextNode();
    if (readersOnlyFeedResults(result)) {
      SmallVector<Operation *> readers(result.getUsers());
      llvm::sort(readers, [](Operation *a, Operation *b) {
        return a->isBeforeInBlock(b);
      });
      for (Operation *reader : readers)
        reader->moveBefore(body.getTerminator());
      firstReader = readers.front();
    }
    builder.setInsertionPoint(firstReader);
    auto wait = WaitOp::create(builder, collective->getLoc(), result.getType(),
                               start->getResult(0));
    // The start has the collective's attributes, its layer among them.
    for (StringRef layerAttrName : {kLayerAttrName, kGradLayerAttrName})
      if (Attribute layer = collective->getAttr(layerAttrName))
        wait->setAttr(layerAttrName, layer);
    result.replaceAllUsesWith(wait.getResult());
    collective->erase();
    if (copy)
      lastCopyWait = wait;
    if (split)
      lastWaitOfTiling[split] = wait;
    if (concat)
      lastWaitOfTiling[concat] = wait;
  }
  // A collective waited right after it starts has nothing to overlap yet:
  // work that does not need its result goes in between.
  SmallVector<WaitOp> waits(body.getOps<WaitOp>());
  for (WaitOp wait : waits)
    if (wait->getPrevNode() == wait.getHandle().getDefiningOp())
      hoistIndependentWork(wait);
}

struct SchedulePass : public mlir::twill::impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp function) {
      if (!function.isExternal())
        schedule(function, prefetchLayers);
    });
  }
};

} // namespace
