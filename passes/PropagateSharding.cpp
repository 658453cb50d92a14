//===- PropagateSharding.cpp - the twill-propagate-sharding pass ----------===//

#include "passes/Passes.h"

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

using Placement = SmallVector<AxisPlacement, 2>;

/// How a module of the Megatron plan splits its weight on tp.
enum class TpStyle { Replicated, Column, Row };

/// The placement of a value, or replicate on every axis.
Placement placementOf(Value value, int axes) {
  auto type = cast<RankedTensorType>(value.getType());
  if (auto placement = dyn_cast_or_null<PlacementAttr>(type.getEncoding()))
    return Placement(placement.getAxes());
  return Placement(axes, AxisPlacement::replicate());
}

struct Propagator {
  FlatSymbolRefAttr mesh;
  int dp = -1, tp = -1, axes = 0;
  int64_t tpSize = 1, kvHeads = 0;
  bool sequenceParallel = true;

  void setPlacement(Value value, ArrayRef<AxisPlacement> entries) {
    auto type = cast<RankedTensorType>(value.getType());
    value.setType(RankedTensorType::get(
        type.getShape(), type.getElementType(),
        PlacementAttr::get(type.getContext(), mesh, entries)));
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
  // Fewer KV heads than tp ranks: k and v are replicated, not split.
  if ((kind == "k_proj" || kind == "v_proj") && kvHeads % tpSize != 0)
    return TpStyle::Replicated;
  return llvm::StringSwitch<TpStyle>(kind)
      .Cases("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj",
             TpStyle::Column)
      .Cases("embed_tokens", "lm_head", TpStyle::Column)
      .Cases("o_proj", "down_proj", TpStyle::Row)
      .Default(TpStyle::Replicated);
}

Placement Propagator::parameterPlacement(StringRef name,
                                         ArrayRef<int64_t> shape) const {
  Placement placement(axes, AxisPlacement::replicate());
  if (dp >= 0 && !shape.empty())
    placement[dp] = AxisPlacement::shard(0); // FSDP storage
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
    Placement placement(axes, AxisPlacement::replicate());
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
    } else if (!shape.empty() && dp >= 0) {
      placement[dp] = AxisPlacement::shard(0); // the batch
    }
    setPlacement(argument, placement);
  }
}

/// Whether `op` is linear in operand `index` when it alone is a partial sum
/// on an axis (and `allPartial`: every operand is).
static bool isLinearIn(Operation *op, unsigned index, bool allPartial) {
  if (isa<MatmulOp, MulOp, ScaleOp, ReshapeOp, TransposeOp, CastOp>(op))
    return !allPartial || op->getNumOperands() == 1;
  if (isa<DivOp>(op))
    return index == 0 && !allPartial;
  return isa<AddOp>(op) && allPartial;
}

/// The residual stream: an add with an operand that something else reads
/// too. Under sequence parallelism it is kept sharded over the sequence,
/// not as a full-size partial sum resolved once per reader.
static bool isResidualAdd(Operation *op) {
  return isa<AddOp>(op) && llvm::any_of(op->getOperands(), [](Value operand) {
           return !operand.hasOneUse();
         });
}

void Propagator::propagate(Operation *op, ShardingRule rule) {
  SmallVector<Placement> operands;
  for (Value operand : op->getOperands())
    operands.push_back(placementOf(operand, axes));
  SmallVector<Placement> results(op->getNumResults(),
                                 Placement(axes, AxisPlacement::replicate()));

  for (int axis = 0; axis < axes; ++axis) {
    int claim = -1;
    bool claimedByParameter = false;
    SmallVector<unsigned> partial;
    for (auto [index, placement] : llvm::enumerate(operands)) {
      if (placement[axis].kind == AxisPlacement::Kind::PartialSum)
        partial.push_back(index);
    }
    bool allPartial = partial.size() == operands.size();
    if (sequenceParallel && axis == tp && isResidualAdd(op))
      allPartial = false; // partial operands are reduce-scattered first
    for (auto [index, placement] : llvm::enumerate(operands)) {
      AxisPlacement entry = placement[axis];
      Value operand = op->getOperand(index);
      bool isParameter =
          isa<BlockArgument>(operand) &&
          cast<func::FuncOp>(
              cast<BlockArgument>(operand).getOwner()->getParentOp())
              .getArgAttr(cast<BlockArgument>(operand).getArgNumber(),
                          kParamAttrName);
      if (entry.kind == AxisPlacement::Kind::PartialSum &&
          !isLinearIn(op, index, allPartial) && sequenceParallel &&
          axis == tp && rule.operands[index].size() >= 2)
        entry = AxisPlacement::shard(1); // reduce-scattered over the sequence
      if (!entry.isShard() || (isParameter && axis == dp))
        continue; // FSDP storage is gathered before use
      const ShardingRule::Dim &dim = rule.operands[index][entry.dim];
      if (dim.empty() || rule.isReplicated(dim.front()))
        continue;
      if (isParameter && !claimedByParameter) {
        claim = dim.front();
        claimedByParameter = true;
      } else if (claim < 0) {
        claim = dim.front();
      }
    }
    for (auto [r, resultDims] : llvm::enumerate(rule.results)) {
      if (claim >= 0) {
        if (rule.isReduction(claim)) {
          results[r][axis] = AxisPlacement::partialSum();
          continue;
        }
        for (auto [d, dim] : llvm::enumerate(resultDims))
          if (!dim.empty() && dim.front() == claim)
            results[r][axis] = AxisPlacement::shard(d);
      } else if (!partial.empty() && llvm::all_of(partial, [&](unsigned index) {
                   return isLinearIn(op, index, allPartial);
                 })) {
        results[r][axis] = AxisPlacement::partialSum();
      }
    }
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
    auto meshes = module.getOps<MeshOp>();
    if (meshes.empty()) {
      module.emitError("twill-propagate-sharding needs a twill.mesh");
      return signalPassFailure();
    }
    MeshOp meshOp = *meshes.begin();
    Propagator propagator;
    propagator.mesh = FlatSymbolRefAttr::get(meshOp.getSymNameAttr());
    propagator.axes = meshOp.getAxes().size();
    propagator.sequenceParallel = sequenceParallel;
    for (auto [index, axis] : llvm::enumerate(meshOp.getAxes())) {
      StringRef name = cast<StringAttr>(axis).getValue();
      if (name == "dp")
        propagator.dp = index;
      if (name == "tp") {
        propagator.tp = index;
        propagator.tpSize = meshOp.getAxisSizes()[index];
      }
    }
    module.walk([&](AttentionOp attention) {
      propagator.kvHeads = shapeOfKey(attention);
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

  static int64_t shapeOfKey(AttentionOp attention) {
    return cast<RankedTensorType>(attention.getKey().getType()).getDimSize(2);
  }
};
} // namespace
