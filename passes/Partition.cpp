//===- Partition.cpp - the twill-partition pass ---------------------------===//
//
// From the placed program (every value typed with its placement) to the
// program one rank runs: collectives wherever an op needs an operand
// somewhere else, local block types everywhere. The decisions are made
// first, on the untouched program, with the same decideAxis propagation
// used; then the program is rewritten.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ShardingPlan.h"

#include "dialects/twill/ShapeChecks.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace mlir::twill {
#define GEN_PASS_DEF_PARTITION
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// What partitioning does to one op, decided before anything changes.
struct OpPlan {
  SmallVector<Placement> operands; // where each operand must be
  int offsetAxis = -1;             // the axis of the op's shard_axis
};

class Partitioner {
public:
  Partitioner(MeshPlan plan, MLIRContext *context)
      : plan(std::move(plan)), builder(context) {
    builder.setListener(&inheritance);
  }

  LogicalResult run(ModuleOp module);

private:
  RankedTensorType placedType(Value value) const {
    return cast<RankedTensorType>(value.getType());
  }
  RankedTensorType localType(RankedTensorType placed,
                             ArrayRef<AxisPlacement> placement) const {
    return RankedTensorType::get(
        localShape(placed.getShape(), placement, plan.axisSizes),
        placed.getElementType());
  }
  LogicalResult planOp(Operation *op);
  LogicalResult planReturn(func::ReturnOp ret);
  FailureOr<Value> convert(Operation *user, Value value,
                           ArrayRef<AxisPlacement> target);
  LogicalResult rewriteOp(Operation *op);
  template <typename PiecesOp>
  void localizeBlocks(PiecesOp op, ArrayRef<AxisPlacement> whole);
  void rewriteGlobalNorm(GlobalNormOp op);

  MeshPlan plan;
  OpBuilder builder;
  /// What partitioning inserts for an op has the op's twill.layer (the
  /// collectives a layer's ops need are the layer's: activation
  /// checkpointing recomputes them with it) and twill.grad_layer.
  LayerMarker inheritance;
  /// Every value's placed type, from before the rewrite.
  DenseMap<Value, RankedTensorType> placed;
  DenseMap<Operation *, OpPlan> plans;
  /// Where each parameter and state lives, by name: function results named
  /// after one are written back to it.
  llvm::StringMap<Placement> homes;
  /// Collectives already inserted: (value, placement) -> converted value.
  DenseMap<std::pair<Value, Attribute>, Value> converted;
  /// The parameter gathered last. FSDP keeps a gathered parameter only
  /// around its use: once another parameter is gathered, the next use
  /// gathers it again (the backward re-gathers what the forward used).
  Value lastGatheredParameter;
};

} // namespace

LogicalResult Partitioner::planOp(Operation *op) {
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled)
    return op->emitError("has no sharding rule");
  ShardingRule rule = ruled.getShardingRule();
  SmallVector<Placement> operands;
  for (Value operand : op->getOperands())
    operands.push_back(placementOf(operand, plan.axes()));
  OpPlan opPlan;
  opPlan.operands.assign(op->getNumOperands(), Placement());
  for (int axis = 0; axis < plan.axes(); ++axis) {
    AxisDecision decision = decideAxis(op, rule, operands, axis, plan);
    for (auto [result, entry] :
         llvm::zip_equal(op->getResults(), decision.results))
      if (!(placementOf(result, plan.axes())[axis] == entry))
        return op->emitError("its placement on axis '")
               << plan.axisNames[axis]
               << "' is not the one its operands give: run "
                  "twill-propagate-sharding with the same options first";
    for (auto [required, entry] :
         llvm::zip_equal(opPlan.operands, decision.operands))
      required.push_back(entry);

    // Ops that need their rank's offset along the axis.
    if (plan.axisSizes[axis] == 1)
      continue;
    Placement &first = opPlan.operands.front();
    bool offset = decision.selfReduced;
    if (isa<EmbeddingOp>(op))
      offset = first[axis].isShard();
    if (isa<AttentionOp, AttentionGradOp>(op))
      offset = first[axis].isShard() && !opPlan.operands[1][axis].isShard();
    if (isa<DequantizeNf4Op>(op)) // a block of the rows or the columns
      offset = first[axis].isShard();
    if (isa<DropoutOp>(op)) // a block of the features
      offset = first[axis].isShard() && first[axis].dim == 2;
    if (!offset)
      continue;
    if (opPlan.offsetAxis >= 0)
      return op->emitError("would need its offset along two mesh axes");
    opPlan.offsetAxis = axis;
  }
  plans[op] = std::move(opPlan);
  return success();
}

LogicalResult Partitioner::planReturn(func::ReturnOp ret) {
  auto function = cast<func::FuncOp>(ret->getParentOp());
  OpPlan opPlan;
  for (unsigned index = 0; index < ret.getNumOperands(); ++index) {
    auto name = function.getResultAttrOfType<StringAttr>(index,
                                                         kOutputAttrName);
    auto home = name ? homes.find(name.getValue()) : homes.end();
    opPlan.operands.push_back(
        home != homes.end()
            ? home->second
            : Placement(plan.axes(), AxisPlacement::replicate()));
  }
  plans[ret] = std::move(opPlan);
  return success();
}

FailureOr<Value> Partitioner::convert(Operation *user, Value value,
                                      ArrayRef<AxisPlacement> target) {
  RankedTensorType type = placed.lookup(value);
  Placement current = placementOf(type, plan.axes());
  // The value's type is already local; the memo is keyed on the target.
  Attribute key = PlacementAttr::get(builder.getContext(), plan.mesh, target);
  bool parameter = isParameter(value);
  if (Value done = converted.lookup({value, key}))
    if (!parameter || value == lastGatheredParameter)
      return done;
  for (int axis = 0; axis < plan.axes(); ++axis)
    if (plan.axisSizes[axis] == 1) // nothing moves on a one-rank axis
      current[axis] = target[axis];
  if (ArrayRef(current) == target)
    return value;
  // RankedTensorType from `value`'s placed type with placement `current`.
  ArrayRef<int64_t> shape = type.getShape();
  // A concat's pieces move as each is made: one tile's partial sum is
  // scattered before the next tile's is computed, never all at once.
  if (isa<ConcatOp>(user) && value.getDefiningOp() &&
      value.getParentBlock() == user->getBlock())
    builder.setInsertionPointAfterValue(value);
  else
    builder.setInsertionPoint(user);
  Location loc = user->getLoc();
  Value local = value;
  auto retype = [&]() { return localType(type, current); };
  auto axisName = [&](int axis) {
    return builder.getStringAttr(plan.axisNames[axis]);
  };
  auto dimAttr = [&](int64_t dim) { return builder.getI64IntegerAttr(dim); };

  // Gathers first, the innermost (first) axis of a dim before the outer.
  for (int axis = 0; axis < plan.axes(); ++axis) {
    AxisPlacement from = current[axis], to = target[axis];
    if (!from.isShard() || from == to)
      continue;
    for (int inner = 0; inner < axis; ++inner)
      if (current[inner] == from)
        return user->emitError("cannot gather axis '")
               << plan.axisNames[axis] << "' of dim " << from.dim
               << " while axis '" << plan.axisNames[inner]
               << "' still splits it";
    SmallVector<int64_t> before = localShape(shape, current, plan.axisSizes);
    current[axis] = to;
    SmallVector<int64_t> after = localShape(shape, current, plan.axisSizes);
    int64_t size = plan.axisSizes[axis];
    bool exchange = to.isShard() && after[from.dim] == before[from.dim] * size &&
                    before[to.dim] == after[to.dim] * size;
    if (exchange) {
      local = AllToAllOp::create(builder, loc, retype(), local, plan.mesh,
                                 axisName(axis), dimAttr(to.dim),
                                 dimAttr(from.dim));
      continue;
    }
    current[axis] = AxisPlacement::replicate();
    local = AllGatherOp::create(builder, loc, retype(), local, plan.mesh,
                                axisName(axis), dimAttr(from.dim));
  }
  // Then scatters and slices, the outermost (last) axis of a dim first;
  // all-reduces last, on the smallest block.
  for (bool toShards : {true, false})
    for (int axis = plan.axes() - 1; axis >= 0; --axis) {
      AxisPlacement from = current[axis], to = target[axis];
      if (from == to || to.isShard() != toShards)
        continue;
      current[axis] = to;
      if (from.kind == AxisPlacement::Kind::PartialSum && !to.isShard()) {
        local = AllReduceOp::create(builder, loc, retype(), local, plan.mesh,
                                    axisName(axis));
      } else if (from.kind == AxisPlacement::Kind::PartialSum) {
        local = ReduceScatterOp::create(builder, loc, retype(), local,
                                        plan.mesh, axisName(axis),
                                        dimAttr(to.dim));
      } else if (to.isShard()) {
        // A constant is the same everywhere: make its block directly.
        if (auto constant = local.getDefiningOp<ConstantOp>())
          local = ConstantOp::create(builder, loc, retype(),
                                     constant.getValueAttr());
        else
          local = LocalSliceOp::create(builder, loc, retype(), local,
                                       plan.mesh, axisName(axis),
                                       dimAttr(to.dim));
      } else {
        return user->emitError("cannot make a partial sum of a whole value");
      }
    }
  converted[{value, key}] = local;
  if (parameter)
    lastGatheredParameter = value;
  return local;
}

void Partitioner::rewriteGlobalNorm(GlobalNormOp op) {
  // The squares of shards sum to the square of the whole: group the inputs
  // by the axes they are split on, sum each group's squares, all-reduce
  // over those axes, add the groups, take the root.
  std::map<SmallVector<int>, SmallVector<Value>> groups;
  for (Value input : op.getInputs()) {
    SmallVector<int> split;
    for (auto [axis, entry] :
         llvm::enumerate(placementOf(placed.lookup(input), plan.axes())))
      if (entry.kind != AxisPlacement::Kind::Replicate &&
          plan.axisSizes[axis] > 1)
        split.push_back(axis);
    groups[split].push_back(input);
  }
  builder.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  Value total;
  for (auto &[axes, inputs] : groups) {
    Value sum = SumSquaresOp::create(builder, loc, scalar, inputs);
    for (int axis : axes)
      sum = AllReduceOp::create(builder, loc, scalar, sum, plan.mesh,
                                builder.getStringAttr(plan.axisNames[axis]));
    total = total ? AddOp::create(builder, loc, scalar, total, sum) : sum;
  }
  if (!total)
    total = ConstantOp::create(builder, loc, scalar,
                               builder.getF64FloatAttr(0.0));
  Value norm = SqrtOp::create(builder, loc, scalar, total);
  placed[norm] = scalar; // whole on every axis
  op.getResult().replaceAllUsesWith(norm);
  op.erase();
}

LogicalResult Partitioner::rewriteOp(Operation *op) {
  inheritance.layer = op->getAttr(kLayerAttrName);
  inheritance.gradLayer = op->getAttr(kGradLayerAttrName);
  if (auto norm = dyn_cast<GlobalNormOp>(op)) {
    rewriteGlobalNorm(norm);
    return success();
  }
  const OpPlan &opPlan = plans[op];
  if (op->hasAttr(kHostReadAttrName)) {
    SmallVector<Attribute> types;
    for (Value result : op->getResults())
      types.push_back(TypeAttr::get(placed.lookup(result)));
    op->setAttr(kGlobalResultsAttrName, builder.getArrayAttr(types));
  }
  if (opPlan.offsetAxis >= 0) {
    op->setAttr("shard_axis",
                builder.getStringAttr(plan.axisNames[opPlan.offsetAxis]));
    if (auto loss = dyn_cast<VocabParallelLossOpInterface>(op)) {
      auto [spanning, dim] = loss.getVocabSpan();
      op->setAttr("vocab_size", builder.getI64IntegerAttr(
                                    placed.lookup(spanning).getShape()[dim]));
    }
  }
  for (auto [index, required] : llvm::enumerate(opPlan.operands)) {
    // An activation made outside every layer (the embedding's partial sum)
    // moves outside every layer too: recomputing the first layer starts
    // from its scattered block, not from the whole it was scattered from.
    Value operand = op->getOperand(index);
    Operation *definer = operand.getDefiningOp();
    bool outside = definer && !definer->hasAttr(kLayerAttrName) &&
                   !isParameter(operand);
    inheritance.layer = outside ? Attribute() : op->getAttr(kLayerAttrName);
    FailureOr<Value> local = convert(op, operand, required);
    if (failed(local))
      return failure();
    op->setOperand(index, *local);
  }
  for (Value result : op->getResults()) {
    RankedTensorType type = placed.lookup(result);
    result.setType(localType(type, placementOf(type, plan.axes())));
  }
  // The whole's placement: where the split's operand was made to be, where
  // the concat's result is.
  if (auto split = dyn_cast<SplitOp>(op))
    localizeBlocks(split, opPlan.operands.front());
  if (auto concat = dyn_cast<ConcatOp>(op))
    localizeBlocks(concat, placementOf(placed.lookup(concat.getResult()),
                                       plan.axes()));
  return success();
}

/// A split or concat whose blocks are the ranks of an axis that splits its
/// dim cuts (or puts together) the rank's own block: consecutive pieces.
template <typename PiecesOp>
void Partitioner::localizeBlocks(PiecesOp op, ArrayRef<AxisPlacement> whole) {
  for (auto [axis, entry] : llvm::enumerate(whole))
    if (entry.isShard() && entry.dim == (int64_t)op.getDim() &&
        plan.axisSizes[axis] == (int64_t)op.getBlocks())
      op.setBlocks(1);
}

LogicalResult Partitioner::run(ModuleOp module) {
  auto functions = llvm::to_vector(module.getOps<func::FuncOp>());
  for (func::FuncOp function : functions)
    for (BlockArgument argument : function.getArguments())
      for (StringRef attrName : {StringRef(kParamAttrName), StringRef(kStateAttrName)})
        if (auto name = function.getArgAttrOfType<StringAttr>(
                argument.getArgNumber(), attrName))
          homes[name.getValue()] = placementOf(argument, plan.axes());

  // Decide everything on the untouched program.
  for (func::FuncOp function : functions) {
    WalkResult walk = function.walk([&](Operation *op) {
      if (isa<func::FuncOp, GlobalNormOp>(op))
        return WalkResult::advance();
      LogicalResult planned = isa<func::ReturnOp>(op)
                                  ? planReturn(cast<func::ReturnOp>(op))
                                  : planOp(op);
      return failed(planned) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    function.walk([&](Operation *op) {
      for (Value result : op->getResults())
        placed[result] = placedType(result);
    });
    for (BlockArgument argument : function.getArguments())
      placed[argument] = placedType(argument);
  }

  // Rewrite: arguments to local blocks (keeping their global type), then
  // every op in program order, so operands are local before their users.
  for (func::FuncOp function : functions) {
    // All at once: setting one argument's attribute rebuilds the array of
    // every argument's, which made this quadratic in the layers.
    SmallVector<DictionaryAttr> argAttrs;
    for (BlockArgument argument : function.getArguments()) {
      RankedTensorType type = placedType(argument);
      NamedAttrList attrs(function.getArgAttrDict(argument.getArgNumber()));
      attrs.set(kGlobalAttrName, TypeAttr::get(type));
      argAttrs.push_back(attrs.getDictionary(module.getContext()));
      argument.setType(localType(type, placementOf(type, plan.axes())));
    }
    function.setAllArgAttrs(argAttrs);
    for (Operation &op :
         llvm::make_early_inc_range(function.getBody().front()))
      if (failed(rewriteOp(&op)))
        return failure();
    Block &body = function.getBody().front();
    // Constants remade as blocks leave their whole originals unused.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<ConstantOp>(op) && op.use_empty())
        op.erase();
    function.setFunctionType(
        FunctionType::get(module.getContext(), body.getArgumentTypes(),
                          body.getTerminator()->getOperandTypes()));
  }
  return success();
}

namespace {
struct PartitionPass
    : public mlir::twill::impl::PartitionBase<PartitionPass> {
  using PartitionBase::PartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<MeshPlan> plan =
        MeshPlan::fromModule(module, sequenceParallel, "twill-partition");
    if (failed(plan))
      return signalPassFailure();
    Partitioner partitioner(*plan, &getContext());
    if (failed(partitioner.run(module)))
      return signalPassFailure();
  }
};
} // namespace
