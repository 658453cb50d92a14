//===- PropagateSharding.cpp - the twill-propagate-sharding pass ----------===//

#include "passes/Passes.h"
#include "passes/ShardingPlan.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::twill {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

struct Propagator {
  MeshPlan plan;

  void setPlacement(Value value, ArrayRef<AxisPlacement> entries) {
    auto type = cast<RankedTensorType>(value.getType());
    value.setType(RankedTensorType::get(
        type.getShape(), type.getElementType(),
        PlacementAttr::get(type.getContext(), plan.mesh, entries)));
  }

  Placement parameterPlacement(TensorParallelAttr split,
                               ArrayRef<int64_t> shape) const;
  void seed(func::FuncOp function);
  void propagate(Operation *op, ShardingRule rule);
};

} // namespace

/// A parameter's placement, or its state's: stored split over dp (FSDP),
/// and over tp as the frontend's twill.tp says, unless tp does not divide
/// the heads or the quantized blocks its split dim holds.
Placement Propagator::parameterPlacement(TensorParallelAttr split,
                                         ArrayRef<int64_t> shape) const {
  Placement placement(plan.axes(), AxisPlacement::replicate());
  if (plan.dp >= 0 && !shape.empty())
    placement[plan.dp] = AxisPlacement::shard(0); // FSDP storage
  int tp = plan.tp;
  if (tp < 0 || !split || shape.empty())
    return placement;
  if (split.getHeads() > 0 && split.getHeads() % plan.axisSizes[tp] != 0)
    return placement; // heads that do not split: attention runs whole
  if (split.getBlocks() > 0 && split.getBlocks() % plan.axisSizes[tp] != 0)
    return placement; // quantized blocks that would be cut
  switch (split.getStyle()) {
  case TensorParallelStyle::Column: // [out, in]: out split
  case TensorParallelStyle::Vocab:  // [vocab, hidden]: vocab split
    placement[tp] = AxisPlacement::shard(0);
    break;
  case TensorParallelStyle::Row: // [out, in]: in split
    if (shape.size() > 1)
      placement[tp] = AxisPlacement::shard(1);
    break;
  case TensorParallelStyle::Replicate:
    break;
  }
  return placement;
}

void Propagator::seed(func::FuncOp function) {
  for (BlockArgument argument : function.getArguments()) {
    unsigned index = argument.getArgNumber();
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(argument.getType()).getShape();
    Placement placement(plan.axes(), AxisPlacement::replicate());
    auto split =
        function.getArgAttrOfType<TensorParallelAttr>(index,
                                                      kTensorParallelAttrName);
    if (function.getArgAttr(index, kParamAttrName) || split) {
      // A parameter, or state that lives where its parameter does
      // (optimizer moments, gradient sums: they carry its twill.tp).
      placement = parameterPlacement(split, shape);
    } else if (function.getArgAttr(index, kStateAttrName)) {
      // Scalars of the step (counts, the step number): whole everywhere.
    } else if (!shape.empty() && plan.dp >= 0) {
      placement[plan.dp] = AxisPlacement::shard(0); // the batch
    }
    setPlacement(argument, placement);
  }
}

void Propagator::propagate(Operation *op, ShardingRule rule) {
  SmallVector<Placement> operands;
  for (Value operand : op->getOperands())
    operands.push_back(placementOf(operand, plan.axes()));
  SmallVector<Placement> results(op->getNumResults());
  for (int axis = 0; axis < plan.axes(); ++axis) {
    AxisDecision decision = decideAxis(op, rule, operands, axis, plan);
    for (auto [result, entry] : llvm::zip_equal(results, decision.results))
      result.push_back(entry);
  }
  for (auto [result, placement] : llvm::zip_equal(op->getResults(), results))
    setPlacement(result, placement);
}

namespace {
struct PropagateShardingPass
    : public mlir::twill::impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshPlan> plan = MeshPlan::fromModule(module, sequenceParallel,
                                                    "twill-propagate-sharding");
    if (failed(plan))
      return signalPassFailure();
    Propagator propagator;
    propagator.plan = *plan;

    for (auto function : module.getOps<func::FuncOp>()) {
      propagator.seed(function);
      WalkResult walk = function.walk([&](Operation *op) {
        if (auto ruled = dyn_cast<ShardingRuleOpInterface>(op)) {
          propagator.propagate(op, ruled.getShardingRule());
          return WalkResult::advance();
        }
        if (isa<func::ReturnOp, func::FuncOp>(op))
          return WalkResult::advance();
        op->emitError("has no sharding rule");
        return WalkResult::interrupt();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      Block &body = function.getBody().front();
      function.setFunctionType(
          FunctionType::get(&getContext(), body.getArgumentTypes(),
                            body.getTerminator()->getOperandTypes()));
    }
  }

};
} // namespace
