//===- PropagateSharding.cpp - the twill-propagate-sharding pass ----------===//

#include "passes/Passes.h"
#include "passes/ShardingPlan.h"

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::twill {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// How a module of the Megatron plan splits its weight on tp.
enum class TpStyle { Replicated, Column, Row };

struct Propagator {
  MeshPlan plan;
  int64_t heads = 0, kvHeads = 0;

  void setPlacement(Value value, ArrayRef<AxisPlacement> entries) {
    auto type = cast<RankedTensorType>(value.getType());
    value.setType(RankedTensorType::get(
        type.getShape(), type.getElementType(),
        PlacementAttr::get(type.getContext(), plan.mesh, entries)));
  }

  TpStyle styleOf(StringRef module) const;
  Placement parameterPlacement(StringRef name, ArrayRef<int64_t> shape) const;
  void seed(func::FuncOp function);
  void propagate(Operation *op, ShardingRule rule);
};

} // namespace

TpStyle Propagator::styleOf(StringRef module) const {
  StringRef kind =
      module.rsplit('.').second.empty() ? module : module.rsplit('.').second;
  int64_t tpSize = plan.axisSizes[plan.tp];
  // Query heads that do not split over tp: attention runs whole on every
  // rank. Key/value heads that do not (fewer than the ranks): k and v are
  // replicated while the query heads split.
  bool attention = kind == "q_proj" || kind == "k_proj" ||
                   kind == "v_proj" || kind == "o_proj";
  if (attention && heads % tpSize != 0)
    return TpStyle::Replicated;
  if ((kind == "k_proj" || kind == "v_proj") && kvHeads % tpSize != 0)
    return TpStyle::Replicated;
  return llvm::StringSwitch<TpStyle>(kind)
      .Cases({"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
              "embed_tokens", "lm_head"},
             TpStyle::Column)
      .Cases({"o_proj", "down_proj"}, TpStyle::Row)
      .Default(TpStyle::Replicated);
}

Placement Propagator::parameterPlacement(StringRef name,
                                         ArrayRef<int64_t> shape) const {
  Placement placement(plan.axes(), AxisPlacement::replicate());
  if (plan.dp >= 0 && !shape.empty())
    placement[plan.dp] = AxisPlacement::shard(0); // FSDP storage
  int tp = plan.tp;
  if (tp < 0)
    return placement;
  bool loraA = name.consume_back(".lora_A.weight");
  bool loraB = !loraA && name.consume_back(".lora_B.weight");
  if (!loraA && !loraB)
    name.consume_back(".weight");
  switch (styleOf(name)) {
  case TpStyle::Column: // [out, in]: out split; LoRA's B follows, A whole
    if (!loraA)
      placement[tp] = AxisPlacement::shard(0);
    break;
  case TpStyle::Row: // [out, in]: in split; LoRA's A follows, B whole
    if (!loraB)
      placement[tp] = AxisPlacement::shard(1);
    break;
  case TpStyle::Replicated:
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
    if (auto name =
            function.getArgAttrOfType<StringAttr>(index, kParamAttrName)) {
      placement = parameterPlacement(name, shape);
    } else if (auto state = function.getArgAttrOfType<StringAttr>(
                   index, kStateAttrName)) {
      // Optimizer state and gradient sums live where their parameter does.
      StringRef parameter = state.getValue();
      for (StringRef suffix : {".grad_sum", ".exp_avg_sq", ".exp_avg"})
        if (parameter.consume_back(suffix))
          placement = parameterPlacement(parameter, shape);
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
    module.walk([&](AttentionOp attention) {
      propagator.heads = shapeOf(attention.getQuery())[2];
      propagator.kvHeads = shapeOf(attention.getKey())[2];
    });

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
