//===- MixedPrecision.cpp - the twill-mixed-precision pass ----------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::twill {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// `type` with a bf16 element type when it holds floats; otherwise null.
RankedTensorType toBF16(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !isa<FloatType>(tensor.getElementType()))
    return {};
  return tensor.clone(BFloat16Type::get(type.getContext()));
}

void lowerPrecision(func::FuncOp function) {
  Block &body = function.getBody().front();
  OpBuilder builder = OpBuilder::atBlockBegin(&body);
  llvm::SmallPtrSet<Operation *, 16> masterCasts;
  // The losses' sums stay fp32 whatever their rank (DPO's per sequence),
  // and so does what is computed from them alone (a tiled loss's tiles'
  // sums added, log-probabilities, dpo_loss's results); so do attention's
  // log-sum-exps, softmax statistics of an fp32 range.
  llvm::DenseSet<Value> keptFp32;
  for (BlockArgument argument : body.getArguments()) {
    unsigned index = argument.getArgNumber();
    // DPO's precomputed reference log-probabilities are such sums, and the
    // weight of a micro-batch's loss sum (the seed of its gradient) and the
    // step's tokens (which weight the routers' auxiliary loss) scale one.
    if (auto role =
            function.getArgAttrOfType<ValueRoleAttr>(index, kRoleAttrName);
        role && (role.getValue() == ValueRole::ReferenceLogps ||
                 role.getValue() == ValueRole::LossWeight ||
                 role.getValue() == ValueRole::StepTokens)) {
      keptFp32.insert(argument);
      continue;
    }
    RankedTensorType bf16 = toBF16(argument.getType());
    // A quantized weight's scales stay as its format has them.
    if (!bf16 || function.getArgAttr(index, kQuantizedAttrName))
      continue;
    if (function.getArgAttr(index, kParamAttrName) &&
        !function.getArgAttr(index, kTrainableAttrName)) {
      argument.setType(bf16); // frozen: stored in bf16
      continue;
    }
    // A trainable fp32 master (or a float input), cast once for every use.
    auto cast = CastOp::create(builder, argument.getLoc(), bf16, argument);
    // The cast belongs to the parameter's layer.
    if (Attribute layer = function.getArgAttr(index, kLayerAttrName))
      cast->setAttr(kLayerAttrName, layer);
    argument.replaceAllUsesExcept(cast, cast);
    masterCasts.insert(cast);
  }
  auto fromSumsAlone = [&](Operation &op) {
    bool any = false;
    for (Value operand : op.getOperands()) {
      if (!isa<FloatType>(getElementTypeOrSelf(operand.getType())))
        continue;
      if (!keptFp32.contains(operand))
        return false;
      any = true;
    }
    return any;
  };
  for (Operation &op : body) {
    // Scalars stay fp32 too (the loss sum), as do the function's results.
    if (masterCasts.contains(&op) || isa<func::ReturnOp>(op))
      continue;
    if (op.hasTrait<OpTrait::twill::Fp32Sums>())
      keptFp32.insert(op.getResults().begin(), op.getResults().end());
    else if (isa<LinearCrossEntropyOp>(op)) // its sums, not its tile
      keptFp32.insert(op.getResult(0));
    else if (auto attention = dyn_cast<AttentionOp>(op))
      keptFp32.insert(attention.getLogSumExp());
    else if (fromSumsAlone(op))
      keptFp32.insert(op.getResults().begin(), op.getResults().end());
    for (OpResult result : op.getResults())
      if (RankedTensorType bf16 = toBF16(result.getType());
          bf16 && bf16.getRank() != 0 && !keptFp32.contains(result))
        result.setType(bf16);
  }
  function.setType(builder.getFunctionType(
      body.getArgumentTypes(), body.getTerminator()->getOperandTypes()));
}

struct MixedPrecisionPass
    : public mlir::twill::impl::MixedPrecisionBase<MixedPrecisionPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp function) {
      if (!function.isExternal())
        lowerPrecision(function);
    });
  }
};

} // namespace
