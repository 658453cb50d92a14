//===- Optimizer.cpp - the twill-optimizer pass ---------------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillEntryPoints.h"
#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::twill {
#define GEN_PASS_DEF_OPTIMIZER
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

constexpr llvm::StringLiteral kGradSuffix = ".grad";

/// The name of the state that is `kind`, kept for `parameter` (none: the
/// empty name): "<parameter>.grad_sum", "step".
std::string stateName(StateKind kind, StringRef parameter = "") {
  StringRef what = stringifyStateKind(kind);
  return parameter.empty() ? what.str() : (parameter + "." + what).str();
}

/// Builds a function's signature as arguments and results are added.
class FunctionBuilder {
public:
  FunctionBuilder(OpBuilder &builder, func::FuncOp function)
      : builder(builder), function(function),
        body(&function.getBody().front()) {}

  /// An argument named `name` as `attrName` says, with `structure` (the
  /// frontend's twill.tp and twill.layer of the parameter it stands for).
  Value addArgument(Type type, StringRef attrName, StringRef name,
                    bool trainable = false,
                    ArrayRef<NamedAttribute> structure = {}) {
    Value argument = body->addArgument(type, function.getLoc());
    SmallVector<NamedAttribute, 4> attrs{
        builder.getNamedAttr(attrName, builder.getStringAttr(name))};
    if (trainable)
      attrs.push_back(
          builder.getNamedAttr(kTrainableAttrName, builder.getUnitAttr()));
    attrs.append(structure.begin(), structure.end());
    argAttrs.push_back(builder.getDictionaryAttr(attrs));
    return argument;
  }

  /// A state that is `kind`, kept for `parameter` (none: the empty name)
  /// and split as its `structure` says; named by stateName.
  Value addState(Type type, StateKind kind, StringRef parameter = "",
                 ArrayRef<NamedAttribute> structure = {}) {
    SmallVector<NamedAttribute, 4> attrs(structure);
    attrs.push_back(builder.getNamedAttr(
        kStateRoleAttrName,
        StateRoleAttr::get(builder.getContext(), kind, parameter)));
    return addArgument(type, kStateAttrName, stateName(kind, parameter),
                       /*trainable=*/false, attrs);
  }

  /// The per-step input that is `role`, named after it.
  Value addInput(Type type, ValueRole role) {
    Value input = addArgument(type, kInputAttrName, stringifyValueRole(role));
    argAttrs.back() = withRole(argAttrs.back(), role);
    return input;
  }

  /// A result named `name`, that is `role` where it has one.
  void addResult(Value value, const Twine &name,
                 std::optional<ValueRole> role = std::nullopt) {
    results.push_back(value);
    DictionaryAttr attrs = builder.getDictionaryAttr(
        builder.getNamedAttr(kOutputAttrName, builder.getStringAttr(name)));
    resultAttrs.push_back(role ? withRole(attrs, *role) : attrs);
  }
  /// An output that is `role`, named after it.
  void addResult(Value value, ValueRole role) {
    addResult(value, stringifyValueRole(role), role);
  }

  /// Replaces the terminator and the signature with what was added.
  void finish(Location loc) {
    if (Operation *terminator = body->empty() ? nullptr : &body->back())
      if (isa<func::ReturnOp>(terminator))
        terminator->erase();
    builder.setInsertionPointToEnd(body);
    func::ReturnOp::create(builder, loc, results);
    function.setFunctionType(builder.getFunctionType(
        body->getArgumentTypes(), ValueRange(results).getTypes()));
    function.setAllArgAttrs(argAttrs);
    function.setAllResultAttrs(resultAttrs);
  }

  DictionaryAttr withRole(DictionaryAttr attrs, ValueRole role) {
    NamedAttrList list(attrs);
    list.set(kRoleAttrName, ValueRoleAttr::get(builder.getContext(), role));
    return list.getDictionary(builder.getContext());
  }

  OpBuilder &builder;
  func::FuncOp function;
  Block *body;
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  SmallVector<Value> results;
};

/// A trainable parameter and where its gradient is summed.
struct Trainable {
  std::string name;
  RankedTensorType type;
  bool decayed; // by AdamW's weight decay (not a norm's weight or a bias)
  /// What the frontend said of its structure (twill.tp, twill.layer): its
  /// gradient sum and optimizer state are split as it is.
  SmallVector<NamedAttribute, 2> structure;
};

/// A parameter's twill.tp and twill.layer, by the parameter's name.
llvm::StringMap<SmallVector<NamedAttribute, 2>>
structureOfParameters(func::FuncOp function) {
  llvm::StringMap<SmallVector<NamedAttribute, 2>> structure;
  for (unsigned index = 0; index < function.getNumArguments(); ++index) {
    auto name = function.getArgAttrOfType<StringAttr>(index, kParamAttrName);
    if (!name)
      continue;
    for (StringRef attrName : {kTensorParallelAttrName, kLayerAttrName})
      if (Attribute value = function.getArgAttr(index, attrName))
        structure[name.getValue()].push_back(NamedAttribute(
            StringAttr::get(function.getContext(), attrName), value));
  }
  return structure;
}

struct OptimizerPass : public mlir::twill::impl::OptimizerBase<OptimizerPass> {
  using OptimizerBase::OptimizerBase;

  void runOnOperation() override;
  FailureOr<SmallVector<Trainable>> accumulateGradients(func::FuncOp step);
  void buildOptimizerStep(func::FuncOp step, ArrayRef<Trainable> trainables);
};

} // namespace

FailureOr<SmallVector<Trainable>>
OptimizerPass::accumulateGradients(func::FuncOp step) {
  OpBuilder builder(step.getContext());
  FunctionBuilder function(builder, step);
  step.getAllArgAttrs(function.argAttrs);
  auto ret = cast<func::ReturnOp>(function.body->getTerminator());
  builder.setInsertionPoint(ret);
  Location loc = step.getLoc();

  SmallVector<Trainable> trainables;
  llvm::StringMap<SmallVector<NamedAttribute, 2>> parameters =
      structureOfParameters(step);
  llvm::StringSet<> undecayed;
  for (unsigned index = 0; index < step.getNumArguments(); ++index)
    if (auto name = step.getArgAttrOfType<StringAttr>(index, kParamAttrName);
        name && step.getArgAttr(index, kNoWeightDecayAttrName))
      undecayed.insert(name.getValue());
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    auto name = step.getResultAttrOfType<StringAttr>(index, kOutputAttrName);
    if (!name)
      return step.emitError("result ") << index << " has no twill.output name";
    std::optional<ValueRole> role;
    if (auto attr = step.getResultAttrOfType<ValueRoleAttr>(index, kRoleAttrName))
      role = attr.getValue();
    if (!name.getValue().ends_with(kGradSuffix)) {
      function.addResult(value, name.getValue(), role);
      continue;
    }
    std::string parameter = name.getValue().drop_back(kGradSuffix.size()).str();
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<NamedAttribute, 2> structure = parameters.lookup(parameter);
    Value sum = function.addState(type, StateKind::GradSum, parameter,
                                  structure);
    // Named after the parameter, as its gradient's matmul that this add
    // may become (twill-fuse-epilogues).
    Location named = NameLoc::get(builder.getStringAttr(parameter), loc);
    function.addResult(AddOp::create(builder, named, type, sum, value),
                       stateName(StateKind::GradSum, parameter));
    trainables.push_back(
        {parameter, type, !undecayed.contains(parameter), structure});
  }
  function.finish(ret.getLoc());
  return trainables;
}

void OptimizerPass::buildOptimizerStep(func::FuncOp step,
                                       ArrayRef<Trainable> trainables) {
  OpBuilder builder(step);
  builder.setInsertionPointAfter(step);
  Location loc = step.getLoc();
  auto optimizer = func::FuncOp::create(builder, loc, "optimizer_step",
                                        builder.getFunctionType({}, {}));
  setEntryRole(optimizer, EntryRole::OptimizerStep);
  optimizer.addEntryBlock();
  FunctionBuilder function(builder, optimizer);
  builder.setInsertionPointToStart(function.body);

  auto scalar = [&](Type element) {
    return RankedTensorType::get({}, element);
  };
  Type f32 = scalar(builder.getF32Type()), i64 = scalar(builder.getI64Type());
  SmallVector<Value> params, sums, expAvgs, expAvgSqs;
  for (const Trainable &trainable : trainables)
    params.push_back(function.addArgument(trainable.type, kParamAttrName,
                                          trainable.name, /*trainable=*/true,
                                          trainable.structure));
  for (const Trainable &trainable : trainables) {
    auto state = [&](StateKind kind) {
      return function.addState(trainable.type, kind, trainable.name,
                               trainable.structure);
    };
    sums.push_back(state(StateKind::GradSum));
    expAvgs.push_back(state(StateKind::ExpAvg));
    expAvgSqs.push_back(state(StateKind::ExpAvgSq));
  }
  Value stepCount = function.addState(i64, StateKind::Step);
  // What the summed gradients are divided by, which the host counts (the
  // step's labelled tokens, or its micro-batches where each micro-batch's
  // gradient is a mean): a step may have fewer micro-batches than others.
  Value divisor = function.addInput(f32, ValueRole::GradientDivisor);
  Value totalSteps = function.addInput(i64, ValueRole::TotalSteps);
  // The step's place in the lr schedule, which the host sets: the steps
  // before it, whether or not they updated (a step without a labelled token
  // updates nothing, as a torch loop that calls scheduler.step() every
  // iteration but skips optimizer.step()); `step` counts the updates made,
  // AdamW's bias correction.
  Value scheduleStep = function.addInput(i64, ValueRole::ScheduleStep);

  // Gradients are sums: scale by 1 / divisor, then clip.
  auto constant = [&](Type type, double value) -> Value {
    return ConstantOp::create(builder, loc, type,
                              builder.getF64FloatAttr(value));
  };
  Value inverseCount =
      DivOp::create(builder, loc, f32, constant(f32, 1.0), divisor);
  Value norm = MulOp::create(builder, loc, f32,
                             GlobalNormOp::create(builder, loc, f32, sums),
                             inverseCount);
  Value gradScale = inverseCount;
  if (maxGradNorm > 0) {
    Value coefficient = ClipCoefficientOp::create(
        builder, loc, f32, norm, builder.getF64FloatAttr(maxGradNorm));
    gradScale = MulOp::create(builder, loc, f32, inverseCount, coefficient);
  }
  Value lrValue = LrScheduleOp::create(builder, loc, f32, scheduleStep,
                                       totalSteps, builder.getF64FloatAttr(lr),
                                       builder.getI64IntegerAttr(warmupSteps));

  for (auto [index, trainable] : llvm::enumerate(trainables)) {
    Location named = NameLoc::get(builder.getStringAttr(trainable.name), loc);
    auto update = AdamWOp::create(
        builder, named, trainable.type, trainable.type, trainable.type,
        params[index], sums[index], expAvgs[index], expAvgSqs[index], lrValue,
        gradScale, stepCount, builder.getF64FloatAttr(beta1),
        builder.getF64FloatAttr(beta2), builder.getF64FloatAttr(eps),
        builder.getF64FloatAttr(trainable.decayed ? weightDecay : 0.0));
    function.addResult(update.getNewParam(), trainable.name);
    function.addResult(update.getNewExpAvg(),
                       stateName(StateKind::ExpAvg, trainable.name));
    function.addResult(update.getNewExpAvgSq(),
                       stateName(StateKind::ExpAvgSq, trainable.name));
    function.addResult(ConstantOp::create(builder, named, trainable.type,
                                          builder.getF64FloatAttr(0.0)),
                       stateName(StateKind::GradSum, trainable.name));
  }
  function.addResult(IncrementOp::create(builder, loc, i64, stepCount),
                     stateName(StateKind::Step));
  function.addResult(norm, ValueRole::GradNorm);
  function.addResult(lrValue, ValueRole::Lr);
  function.finish(loc);
}

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp step = entryPoint(module, EntryRole::TrainStep);
  if (!step) {
    module.emitError("twill-optimizer needs the train step of "
                     "twill-autodiff (twill.entry = #twill.entry<train_step>)");
    return signalPassFailure();
  }
  FailureOr<SmallVector<Trainable>> trainables = accumulateGradients(step);
  if (failed(trainables))
    return signalPassFailure();
  buildOptimizerStep(step, *trainables);
}
