//===- Autodiff.cpp - the twill-autodiff pass -----------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::twill {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// Appends the reverse pass to `function`, a clone of @forward.
class ReverseBuilder {
public:
  explicit ReverseBuilder(func::FuncOp function)
      : function(function), builder(function.getContext()) {
    builder.setListener(&marker);
  }

  LogicalResult build();

private:
  /// Adds `grad` to the cotangent of `value`.
  void accumulate(Value value, Value grad, Location loc) {
    Value &slot = cotangents[value];
    slot = slot ? AddOp::create(builder, loc, slot.getType(), slot, grad)
                      .getResult()
                : grad;
  }

  func::FuncOp function;
  /// Marks the ops built for a layer's op with its layer as
  /// twill.grad_layer: the Executable says which layer each backward
  /// instruction is of.
  LayerMarker marker;
  OpBuilder builder;
  llvm::DenseMap<Value, Value> cotangents;
};

} // namespace

LogicalResult ReverseBuilder::build() {
  Block &body = function.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getNumOperands() < 1 ||
      !isa<FloatType>(
          cast<RankedTensorType>(ret.getOperand(0).getType()).getElementType()))
    return function.emitError("the first result must be the loss sum");

  // Active values: those that depend on a trainable parameter.
  llvm::DenseSet<Value> active;
  SmallVector<BlockArgument> trainable;
  for (BlockArgument argument : body.getArguments())
    if (function.getArgAttr(argument.getArgNumber(), kTrainableAttrName)) {
      active.insert(argument);
      trainable.push_back(argument);
    }
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator()) {
    forwardOps.push_back(&op);
    // A detached value is a constant to the gradient.
    if (!isa<DetachOp>(op) &&
        llvm::any_of(op.getOperands(),
                     [&](Value operand) { return active.contains(operand); }))
      active.insert(op.result_begin(), op.result_end());
  }

  builder.setInsertionPoint(ret);
  // The gradient is of the loss sum, or, where the forward has a
  // loss_weight input (which the host sets a micro-batch at a time), of the
  // sum times it.
  Value loss = ret.getOperand(0);
  Value seed;
  for (BlockArgument argument : body.getArguments())
    if (auto role = function.getArgAttrOfType<ValueRoleAttr>(
            argument.getArgNumber(), kRoleAttrName);
        role && role.getValue() == ValueRole::LossWeight)
      seed = argument;
  cotangents[loss] =
      seed ? seed
           : ConstantOp::create(builder, loss.getLoc(), loss.getType(),
                                builder.getF64FloatAttr(1.0))
                 .getResult();

  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultCotangents =
        llvm::map_to_vector(op->getResults(), [&](Value result) {
          return cotangents.lookup(result);
        });
    SmallVector<bool> needed =
        llvm::map_to_vector(op->getOperands(), [&](Value operand) {
          return active.contains(operand);
        });
    if (llvm::all_of(resultCotangents, [](Value v) { return !v; }) ||
        llvm::none_of(needed, [](bool b) { return b; }))
      continue;
    marker.gradLayer = op->getAttr(kLayerAttrName);
    auto rule = dyn_cast<VJPOpInterface>(op);
    if (!rule)
      return op->emitError("has no gradient rule, but a trainable parameter "
                           "reaches the loss through it");
    FailureOr<SmallVector<Value>> grads =
        rule.buildVJP(builder, resultCotangents, needed);
    if (failed(grads))
      return failure();
    for (auto [operand, grad] : llvm::zip_equal(op->getOperands(), *grads))
      if (grad)
        accumulate(operand, grad, op->getLoc());
  }

  marker.gradLayer = nullptr;
  // Results: the forward's, then one gradient per trainable parameter (zero
  // for one the loss does not depend on).
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  function.getAllResultAttrs(resultAttrs);
  for (BlockArgument parameter : trainable) {
    Value grad = cotangents.lookup(parameter);
    if (!grad)
      grad =
          ConstantOp::create(builder, parameter.getLoc(), parameter.getType(),
                             builder.getF64FloatAttr(0.0));
    results.push_back(grad);
    auto name = function.getArgAttrOfType<StringAttr>(parameter.getArgNumber(),
                                                      kParamAttrName);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        kOutputAttrName,
        builder.getStringAttr((name ? name.str() : "parameter") + ".grad"))));
  }
  func::ReturnOp::create(builder, ret.getLoc(), results);
  ret.erase();
  function.setFunctionType(builder.getFunctionType(
      body.getArgumentTypes(), ValueRange(results).getTypes()));
  function.setAllResultAttrs(resultAttrs);
  return success();
}

/// The backward reads a quantized weight dequantized again from its stored
/// bytes, right before its first reader there, as FSDP gathers a weight
/// again: the forward's full-precision copy dies after the forward's last
/// product, never held across the step.
static void dequantizeAgainForBackward(func::FuncOp step) {
  Block &body = step.getBody().front();
  Operation *loss = forwardLoss(body);
  if (!loss)
    return;
  SmallVector<Operation *> dequantized;
  for (Operation &op : body) {
    if (&op == loss)
      break;
    if (isDequantize(&op))
      dequantized.push_back(&op);
  }
  OpBuilder builder(step.getContext());
  for (Operation *op : dequantized) {
    SmallVector<OpOperand *> backwardUses;
    Operation *first = nullptr;
    for (OpOperand &use : op->getResult(0).getUses()) {
      Operation *user = use.getOwner();
      if (!loss->isBeforeInBlock(user))
        continue;
      backwardUses.push_back(&use);
      if (!first || user->isBeforeInBlock(first))
        first = user;
    }
    if (!first)
      continue;
    builder.setInsertionPoint(first);
    Operation *again = builder.clone(*op);
    // Made for the backward of its layer.
    if (Attribute layer = again->getAttr(kLayerAttrName)) {
      again->removeAttr(kLayerAttrName);
      again->setAttr(kGradLayerAttrName, layer);
    }
    for (OpOperand *use : backwardUses)
      use->set(again->getResult(0));
  }
}

namespace {
struct AutodiffPass : public mlir::twill::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp forward = entryPoint(module, EntryRole::Forward);
    if (!forward) {
      module.emitError("twill-autodiff needs a forward entry point "
                       "(twill.entry = #twill.entry<forward>)");
      return signalPassFailure();
    }
    if (entryPoint(module, EntryRole::TrainStep)) {
      module.emitError("the module already has a train step");
      return signalPassFailure();
    }
    OpBuilder builder(forward);
    builder.setInsertionPointAfter(forward);
    auto step = cast<func::FuncOp>(builder.clone(*forward));
    step.setSymName("train_step");
    setEntryRole(step, EntryRole::TrainStep);
    // The host reads the logits @forward computes: the step's would only
    // keep memory of their own (a sequence times the vocab) for nothing,
    // and a loss that forms them tile by tile does not read them at all.
    step.walk([](Operation *op) { op->removeAttr(kHostReadAttrName); });
    Block &body = step.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
    if (failed(ReverseBuilder(step).build()))
      return signalPassFailure();
    dequantizeAgainForBackward(step);
    // @forward evaluates: LoRA's dropout is the identity there.
    forward.walk([](DropoutOp dropout) {
      dropout.replaceAllUsesWith(dropout.getInput());
      dropout.erase();
    });
    // Detached values have served: no later pass sees a detach.
    for (func::FuncOp function : {forward, step})
      function.walk([](DetachOp detach) {
        detach.replaceAllUsesWith(detach.getInput());
        detach.erase();
      });
  }
};
} // namespace
