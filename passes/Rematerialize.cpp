//===- Rematerialize.cpp - the twill-rematerialize pass -------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillEntryPoints.h"
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

/// The ops of a layer (`ops`, in program order) the backward recomputes.
/// FULL: all of them, from what crosses layers. Selective: the cheap ops
/// whose operands the backward holds anyway (values from outside the
/// layer, values kept because the backward reads them, or recomputed
/// ones; never a costly one, Twill_Costly), so recomputing keeps nothing
/// alive that would not be kept
/// without checkpointing: norms and SwiGLU, not the sum of a LoRA
/// product and its base (which would keep both products).
llvm::DenseSet<Operation *>
recomputedOps(ArrayRef<Operation *> ops, bool selective,
              llvm::function_ref<bool(Operation *)> inBackward) {
  llvm::DenseSet<Operation *> recomputed(ops.begin(), ops.end());
  if (!selective)
    return recomputed;
  recomputed.clear();
  llvm::DenseSet<Operation *> members(ops.begin(), ops.end());
  llvm::DenseSet<Value> held; // kept for the backward, or recomputed
  for (Operation *op : ops) {
    bool recompute = !op->hasTrait<OpTrait::twill::Costly>() &&
                     llvm::all_of(op->getOperands(), [&](Value operand) {
                       Operation *definer = operand.getDefiningOp();
                       return !definer || !members.contains(definer) ||
                              held.contains(operand);
                     });
    if (recompute)
      recomputed.insert(op);
    for (Value result : op->getResults())
      if (recompute || llvm::any_of(result.getUsers(), inBackward))
        held.insert(result);
  }
  return recomputed;
}

LogicalResult rematerialize(func::FuncOp function, bool selective,
                            int64_t recomputedLayers) {
  Block &body = function.getBody().front();
  // The forward is everything up to the loss; the backward follows it.
  Operation *loss = forwardLoss(body);
  if (!loss)
    return function.emitError("twill-rematerialize: no loss in @train_step");
  std::map<int64_t, SmallVector<Operation *>> layers;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (std::optional<int64_t> layer = layerOf(&op))
      if (recomputedLayers < 0 || *layer < recomputedLayers)
        layers[*layer].push_back(&op);
  }
  auto inBackward = [&](Operation *user) {
    return loss->isBeforeInBlock(user);
  };
  for (auto &[layer, ops] : layers) {
    llvm::DenseSet<Operation *> members(ops.begin(), ops.end());
    llvm::DenseSet<Operation *> recomputed =
        recomputedOps(ops, selective, inBackward);
    // Values the backward reads that are recomputed: those no forward op
    // outside the layer reads (what crosses layers is kept).
    SmallVector<OpOperand *> redirected;
    // Each recomputed op is cloned right before the first op that needs
    // its clone (a backward op, or the clone of a later recomputed op), so
    // a recomputed value lives only from where the backward first needs
    // it: the MLP's recomputed activations are not held while attention's
    // backward runs, nor one tile's while another's runs.
    llvm::DenseMap<Operation *, Operation *> anchor;
    auto needAt = [&](Operation *op, Operation *at) {
      Operation *&first = anchor[op];
      if (!first || at->isBeforeInBlock(first))
        first = at;
    };
    for (Operation *op : llvm::reverse(ops)) {
      if (!recomputed.contains(op))
        continue;
      for (Value result : op->getResults()) {
        bool crossesLayers = llvm::any_of(result.getUsers(), [&](Operation *u) {
          return !inBackward(u) && !members.contains(u);
        });
        if (crossesLayers)
          continue;
        for (OpOperand &use : result.getUses()) {
          Operation *user = use.getOwner();
          if (inBackward(user)) {
            redirected.push_back(&use);
            needAt(op, user);
          } else if (Operation *clonedUser = anchor.lookup(user)) {
            needAt(op, clonedUser);
          }
        }
      }
    }
    IRMapping mapping; // a value not recomputed is read where it is
    OpBuilder builder(function.getContext());
    for (Operation *op : ops)
      if (Operation *at = anchor.lookup(op)) {
        // After the clones placed at `at` before it: its operands'.
        builder.setInsertionPoint(at);
        builder.clone(*op, mapping);
      }
    for (OpOperand *use : redirected)
      use->set(mapping.lookup(use->get()));
  }
  return success();
}

struct RematerializePass
    : public mlir::twill::impl::RematerializeBase<RematerializePass> {
  using RematerializeBase::RematerializeBase;
  void runOnOperation() override {
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (entryRoleOf(function) == EntryRole::TrainStep &&
          failed(rematerialize(function, selective, layers)))
        return signalPassFailure();
  }
};

} // namespace
