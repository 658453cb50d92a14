//===- ShardingPlan.cpp - where an op's operands and results live ---------===//

#include "passes/ShardingPlan.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace mlir::twill;

Placement mlir::twill::placementOf(Type type, int axes) {
  auto tensor = cast<RankedTensorType>(type);
  if (auto placement = dyn_cast_or_null<PlacementAttr>(tensor.getEncoding()))
    return Placement(placement.getAxes());
  return Placement(axes, AxisPlacement::replicate());
}

FailureOr<MeshPlan> MeshPlan::fromModule(ModuleOp module, bool sequenceParallel,
                                         StringRef passName) {
  auto meshes = module.getOps<MeshOp>();
  if (meshes.empty())
    return module.emitError(passName) << " needs a twill.mesh";
  // An addend would be added once per rank holding a partial product.
  WalkResult fused = module.walk([&](MatmulOp op) {
    if (!op.hasEpilogue())
      return WalkResult::advance();
    op.emitError(passName) << " runs before twill-fuse-epilogues";
    return WalkResult::interrupt();
  });
  if (fused.wasInterrupted())
    return failure();
  MeshOp meshOp = *meshes.begin();
  MeshPlan plan;
  plan.mesh = FlatSymbolRefAttr::get(meshOp.getSymNameAttr());
  plan.sequenceParallel = sequenceParallel;
  for (auto [index, axis] : llvm::enumerate(meshOp.getAxes())) {
    plan.axisNames.push_back(cast<StringAttr>(axis).getValue());
    plan.axisSizes.push_back(meshOp.getAxisSizes()[index]);
  }
  // The axes by what they parallelise, whatever they are named.
  plan.dp = meshOp.axisOf(AxisRole::Data).value_or(-1);
  plan.tp = meshOp.axisOf(AxisRole::Tensor).value_or(-1);
  return plan;
}

bool mlir::twill::isParameter(Value value) {
  if (auto cast = value.getDefiningOp<CastOp>())
    return isParameter(cast.getInput());
  if (Operation *definer = value.getDefiningOp();
      definer && isDequantize(definer))
    return isParameter(definer->getOperand(0));
  auto argument = dyn_cast<BlockArgument>(value);
  if (!argument)
    return false;
  auto function = dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
  return function &&
         function.getArgAttr(argument.getArgNumber(), kParamAttrName);
}

SmallVector<int64_t> mlir::twill::localShape(ArrayRef<int64_t> shape,
                                             ArrayRef<AxisPlacement> placement,
                                             ArrayRef<int64_t> axisSizes) {
  SmallVector<int64_t> local(shape);
  for (int axis = placement.size() - 1; axis >= 0; --axis)
    if (placement[axis].isShard()) {
      int64_t &size = local[placement[axis].dim];
      size = (size + axisSizes[axis] - 1) / axisSizes[axis];
    }
  return local;
}

/// Whether `op` is linear in operand `index` when it alone is a partial sum
/// on an axis (and `allPartial`: every operand is).
static bool isLinearIn(Operation *op, unsigned index, bool allPartial) {
  if (op->hasTrait<OpTrait::twill::Multilinear>())
    return !allPartial || op->getNumOperands() == 1;
  if (isa<DivOp>(op))
    return index == 0 && !allPartial;
  return op->hasTrait<OpTrait::twill::Additive>() && allPartial;
}

/// The residual stream: an add with an operand that something else reads
/// too. Under sequence parallelism it is kept sharded over the sequence,
/// not as a full-size partial sum resolved once per reader.
static bool isResidualAdd(Operation *op) {
  return isa<AddOp>(op) && llvm::any_of(op->getOperands(), [](Value operand) {
           return !operand.hasOneUse();
         });
}

/// A concat whose blocks are the axis's ranks: under sequence parallelism
/// its partial pieces (a tile's row-parallel products) are each
/// reduce-scattered into the rank's block, never summed whole.
static bool concatsBlocksOf(Operation *op, int64_t ranks) {
  auto concat = dyn_cast<ConcatOp>(op);
  return concat && (int64_t)concat.getBlocks() == ranks && concat.getDim() == 1;
}

/// Whether some tensor of `rule` has both factors: then one axis cannot
/// split both.
static bool coOccur(const ShardingRule &rule, int a, int b) {
  auto has = [](const ShardingRule::Tensor &tensor, int factor) {
    return llvm::any_of(tensor, [&](const ShardingRule::Dim &dim) {
      return llvm::is_contained(dim, factor);
    });
  };
  for (ArrayRef<ShardingRule::Tensor> tensors :
       {ArrayRef(rule.operands), ArrayRef(rule.results),
        ArrayRef(rule.internals)})
    for (const ShardingRule::Tensor &tensor : tensors)
      if (has(tensor, a) && has(tensor, b))
        return true;
  return false;
}

/// The dim of `tensor` whose major factor is one of `claimed`, or -1.
static int claimedDim(const ShardingRule::Tensor &tensor,
                      ArrayRef<int> claimed) {
  for (auto [d, dim] : llvm::enumerate(tensor))
    if (!dim.empty() && llvm::is_contained(claimed, dim.front()))
      return d;
  return -1;
}

AxisDecision mlir::twill::decideAxis(Operation *op, const ShardingRule &rule,
                                     ArrayRef<Placement> operands, int axis,
                                     const MeshPlan &plan) {
  using Kind = AxisPlacement::Kind;
  AxisDecision decision;
  unsigned count = operands.size();
  SmallVector<AxisPlacement> entries;
  SmallVector<unsigned> partial;
  for (auto [index, placement] : llvm::enumerate(operands)) {
    entries.push_back(placement[axis]);
    if (placement[axis].kind == Kind::PartialSum)
      partial.push_back(index);
  }
  bool allPartial = count && partial.size() == count;
  bool sequenceParallel = plan.sequenceParallel && axis == plan.tp;
  if (sequenceParallel &&
      (isResidualAdd(op) || concatsBlocksOf(op, plan.axisSizes[axis])))
    allPartial = false; // partial operands are reduce-scattered first
  bool linearPartial =
      !partial.empty() && llvm::all_of(partial, [&](unsigned index) {
        return isLinearIn(op, index, allPartial);
      });

  // Claim the factor of a sharded operand dim: a parameter's first (the
  // model plan decides), else the first operand's; then any other that no
  // tensor of the rule holds together with a claimed one (attention's key
  // heads beside its query heads).
  SmallVector<int> candidates;
  int parameterClaim = -1;
  for (auto [index, entry] : llvm::enumerate(entries)) {
    Value operand = op->getOperand(index);
    // Under sequence parallelism a partial sum entering a nonlinear op is
    // reduce-scattered over the sequence.
    if (entry.kind == Kind::PartialSum && !linearPartial && sequenceParallel &&
        rule.operands[index].size() >= 3)
      entry = entries[index] = AxisPlacement::shard(1);
    bool parameter = isParameter(operand);
    // FSDP storage is gathered before use, except by the cast that makes
    // it the compute dtype: that runs on the shard.
    if (!entry.isShard() || (parameter && axis == plan.dp && !isa<CastOp>(op)))
      continue;
    const ShardingRule::Dim &dim = rule.operands[index][entry.dim];
    if (dim.empty() || !rule.splitsInto(dim.front(), plan.axisSizes[axis]))
      continue;
    candidates.push_back(dim.front());
    if (parameter && parameterClaim < 0)
      parameterClaim = dim.front();
  }
  if (!candidates.empty())
    decision.claimed.push_back(parameterClaim >= 0 ? parameterClaim
                                                   : candidates.front());
  for (int factor : candidates)
    if (!llvm::any_of(decision.claimed, [&](int claimed) {
          return claimed == factor || coOccur(rule, claimed, factor);
        }))
      decision.claimed.push_back(factor);
  decision.selfReduced = llvm::any_of(
      decision.claimed, [&](int f) { return rule.isSelfReduced(f); });
  bool reduces = llvm::any_of(decision.claimed,
                              [&](int f) { return rule.isReduction(f); });

  for (const ShardingRule::Tensor &result : rule.results) {
    int dim = claimedDim(result, decision.claimed);
    if (dim >= 0)
      decision.results.push_back(AxisPlacement::shard(dim));
    else if (reduces || (decision.claimed.empty() && linearPartial))
      decision.results.push_back(AxisPlacement::partialSum());
    else
      decision.results.push_back(AxisPlacement::replicate());
  }
  bool partialResult = llvm::any_of(decision.results, [](AxisPlacement p) {
    return p.kind == Kind::PartialSum;
  });
  for (auto [index, entry] : llvm::enumerate(entries)) {
    int dim = claimedDim(rule.operands[index], decision.claimed);
    if (dim >= 0)
      decision.operands.push_back(AxisPlacement::shard(dim));
    else if (partialResult && entry.kind == Kind::PartialSum && linearPartial)
      decision.operands.push_back(entry);
    else
      decision.operands.push_back(AxisPlacement::replicate());
  }
  return decision;
}
