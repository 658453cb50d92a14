//===- Schedule.cpp - the twill-schedule pass -----------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

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
/// and no earlier than the beginning of the layer `prefetch` layers before
/// its own in program order (a collective outside every layer counts from
/// the layer before it). Null: the top of the block.
Operation *startPoint(Operation *collective, int64_t prefetch) {
  Operation *input = collective->getOperand(0).getDefiningOp();
  std::optional<int64_t> current = layerOf(collective);
  int64_t changes = 0;
  for (Operation *op = collective->getPrevNode(); op != input;
       op = op->getPrevNode()) {
    std::optional<int64_t> layer = layerOf(op);
    if (!layer || layer == current)
      continue;
    if (++changes > prefetch)
      return op; // the end of the layer before the one it may overlap
    current = layer;
  }
  return input;
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

void schedule(func::FuncOp function, int64_t prefetch) {
  Block &body = function.getBody().front();
  SmallVector<Operation *> collectives;
  for (Operation &op : body)
    if (isa<AllGatherOp, ReduceScatterOp, AllReduceOp, AllToAllOp>(op))
      collectives.push_back(&op);
  for (Operation *collective : collectives) {
    Value result = collective->getResult(0);
    if (result.use_empty())
      continue;
    // Starts placed at one point keep their program order.
    Operation *after = startPoint(collective, prefetch);
    Operation *next = after ? after->getNextNode() : &body.front();
    while (next->getNumResults() == 1 &&
           isa<PendingType>(next->getResult(0).getType()))
      next = next->getNextNode();
    OpBuilder builder(next);
    Operation *start = createStart(builder, collective);

    // The wait: before the first reader, or at the end with readers that
    // only make the function's results.
    Operation *firstReader = nullptr;
    for (Operation *reader : result.getUsers())
      if (!firstReader || reader->isBeforeInBlock(firstReader))
        firstReader = reader;
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
    if (Attribute layer = collective->getAttr(kLayerAttrName))
      wait->setAttr(kLayerAttrName, layer);
    result.replaceAllUsesWith(wait.getResult());
    collective->erase();
  }
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
