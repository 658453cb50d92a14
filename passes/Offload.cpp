//===- Offload.cpp - the twill-offload pass -------------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::twill {
#define GEN_PASS_DEF_OFFLOAD
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

LogicalResult offload(func::FuncOp function, int64_t offloadedLayers) {
  Block &body = function.getBody().front();
  // The forward is everything up to the loss; the backward follows it.
  Operation *loss = forwardLoss(body);
  if (!loss)
    return function.emitError("twill-offload: no loss in @train_step");
  auto inBackward = [&](Operation *user) {
    return loss->isBeforeInBlock(user);
  };
  SmallVector<Operation *> forward;
  for (Operation &op : body) {
    forward.push_back(&op);
    if (&op == loss)
      break;
  }
  OpBuilder builder(function.getContext());
  for (Operation *op : forward)
    for (Value value : op->getResults()) {
      if (!isa<RankedTensorType>(value.getType()))
        continue; // a collective's handle: its wait's tensor may go
      // What the backward reads, but not what the step returns (kept anyway).
      SmallVector<OpOperand *> backwardUses;
      Operation *lastForwardUse = op;
      bool returned = false;
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        returned |= isa<func::ReturnOp>(user);
        if (inBackward(user))
          backwardUses.push_back(&use);
        else if (lastForwardUse->isBeforeInBlock(user))
          lastForwardUse = user;
      }
      if (backwardUses.empty() || returned)
        continue;
      Operation *firstBackwardUse = backwardUses.front()->getOwner();
      for (OpOperand *use : backwardUses)
        if (use->getOwner()->isBeforeInBlock(firstBackwardUse))
          firstBackwardUse = use->getOwner();
      if (offloadedLayers >= 0) {
        std::optional<int64_t> layer = layerOf(firstBackwardUse);
        if (!layer || *layer >= offloadedLayers)
          continue; // kept on the device
      }
      // Out once the forward is done with it, back right before the
      // backward needs it; both belong to the value's layer.
      builder.setInsertionPointAfter(lastForwardUse);
      auto out = OffloadOp::create(builder, value.getLoc(), value.getType(), value);
      builder.setInsertionPoint(firstBackwardUse);
      auto back = ReloadOp::create(builder, value.getLoc(), value.getType(),
                                   out.getResult());
      if (Attribute layer = op->getAttr(kLayerAttrName))
        for (Operation *made : {out.getOperation(), back.getOperation()})
          made->setAttr(kLayerAttrName, layer);
      for (OpOperand *use : backwardUses)
        use->set(back.getResult());
    }
  return success();
}

struct OffloadPass : public mlir::twill::impl::OffloadBase<OffloadPass> {
  using OffloadBase::OffloadBase;
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (entryRoleOf(function) == EntryRole::TrainStep &&
          failed(offload(function, layers)))
        return signalPassFailure();
  }
};

} // namespace
