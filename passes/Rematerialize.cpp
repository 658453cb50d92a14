//===- Rematerialize.cpp - the twill-rematerialize pass -------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>

namespace mlir::twill {
#define GEN_PASS_DEF_REMATERIALIZE
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

LogicalResult rematerialize(func::FuncOp function) {
  Block &body = function.getBody().front();
  // The forward is everything up to the loss; the backward follows it.
  Operation *loss = nullptr;
  for (Operation &op : body)
    if (isa<CrossEntropyOp>(op)) {
      loss = &op;
      break;
    }
  if (!loss)
    return function.emitError("twill-rematerialize: no loss in @train_step");
  std::map<int64_t, SmallVector<Operation *>> layers;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (std::optional<int64_t> layer = layerOf(&op))
      layers[*layer].push_back(&op);
  }
  auto inBackward = [&](Operation *user) {
    return loss->isBeforeInBlock(user);
  };
  for (auto &[layer, ops] : layers) {
    llvm::DenseSet<Operation *> members(ops.begin(), ops.end());
    // Values the backward reads that are recomputed: those no forward op
    // outside the layer reads (what crosses layers is kept).
    SmallVector<OpOperand *> redirected;
    Operation *firstUse = nullptr;
    for (Operation *op : ops)
      for (Value result : op->getResults()) {
        bool crossesLayers = llvm::any_of(result.getUsers(), [&](Operation *u) {
          return !inBackward(u) && !members.contains(u);
        });
        if (crossesLayers)
          continue;
        for (OpOperand &use : result.getUses()) {
          Operation *user = use.getOwner();
          if (!inBackward(user))
            continue;
          redirected.push_back(&use);
          if (!firstUse || user->isBeforeInBlock(firstUse))
            firstUse = user;
        }
      }
    if (!firstUse)
      continue;
    OpBuilder builder(firstUse);
    IRMapping mapping;
    SmallVector<Operation *> clones;
    for (Operation *op : ops)
      clones.push_back(builder.clone(*op, mapping));
    for (OpOperand *use : redirected)
      use->set(mapping.lookup(use->get()));
    // Clones nothing reads (the layer's output, kept from the forward).
    for (Operation *clone : llvm::reverse(clones))
      if (clone->use_empty())
        clone->erase();
  }
  return success();
}

struct RematerializePass
    : public mlir::twill::impl::RematerializeBase<RematerializePass> {
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (function.getSymName() == "train_step" &&
          failed(rematerialize(function)))
        return signalPassFailure();
  }
};

} // namespace
