//===- FuseEpilogues.cpp - the twill-fuse-epilogues pass ------------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::twill {
#define GEN_PASS_DEF_FUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// The matmul that computes `value` and nothing else reads, without an
/// addend yet.
MatmulOp soleMatmul(Value value) {
  auto matmul = value.getDefiningOp<MatmulOp>();
  if (!matmul || matmul.getAddend() || !value.hasOneUse())
    return {};
  return matmul;
}

/// `matmul` again at `at`, with `alpha` and `addend`; it replaces `at`.
void refuse(MatmulOp matmul, Operation *at, double alpha, Value addend) {
  OpBuilder builder(at);
  auto fused =
      MatmulOp::create(builder, at->getLoc(), matmul.getType(), matmul.getLhs(),
                       matmul.getRhs(), addend, matmul.getTransposeLhs(),
                       matmul.getTransposeRhs(), APFloat(alpha));
  // What marks the value the op computed (host_read logits) stays on it.
  for (NamedAttribute attribute : at->getDiscardableAttrs())
    fused->setAttr(attribute.getName(), attribute.getValue());
  at->getResult(0).replaceAllUsesWith(fused.getResult());
  at->erase();
  if (matmul->use_empty())
    matmul->erase();
}

/// A scale that only matmuls read, each as one operand (not as the addend,
/// not as both): (s X) W = s (X W), so the factor moves into each reader's
/// alpha and the scale never runs. LoRA's backward scales the output
/// gradient once for two products (B's gradient and the one through B).
void foldIntoReaders(ScaleOp scale) {
  Value scaled = scale.getResult();
  // A scale something is said of stays (which layer's backward it is does
  // not count: the readers are of the same layer's).
  bool marked = llvm::any_of(
      scale->getDiscardableAttrs(), [](NamedAttribute attribute) {
        return attribute.getName() != kGradLayerAttrName;
      });
  if (marked || scaled.use_empty())
    return;
  for (Operation *reader : scaled.getUsers()) {
    auto matmul = dyn_cast<MatmulOp>(reader);
    if (!matmul || matmul.getAddend() == scaled ||
        matmul.getLhs() == matmul.getRhs())
      return;
  }
  double factor = scale.getFactor().convertToDouble();
  for (Operation *reader : llvm::make_early_inc_range(scaled.getUsers())) {
    auto matmul = cast<MatmulOp>(reader);
    matmul.setAlpha(APFloat(matmul.getAlpha().convertToDouble() * factor));
  }
  scaled.replaceAllUsesWith(scale.getInput());
  scale->erase();
}

void fuse(func::FuncOp function) {
  // Scales first, so that an add then finds the scaled matmul.
  SmallVector<ScaleOp> scales(function.getOps<ScaleOp>());
  for (ScaleOp scale : scales) {
    if (MatmulOp matmul = soleMatmul(scale.getInput()))
      refuse(matmul, scale,
             matmul.getAlpha().convertToDouble() *
                 scale.getFactor().convertToDouble(),
             Value());
    else
      foldIntoReaders(scale);
  }
  SmallVector<AddOp> adds(function.getOps<AddOp>());
  for (AddOp add : adds) {
    // The later operand's matmul takes the other as its addend, which is
    // then certain to be computed before the add.
    for (auto [product, other] : {std::pair(add.getRhs(), add.getLhs()),
                                  std::pair(add.getLhs(), add.getRhs())}) {
      MatmulOp matmul = soleMatmul(product);
      if (!matmul || product == other)
        continue;
      refuse(matmul, add, matmul.getAlpha().convertToDouble(), other);
      break;
    }
  }
}

struct FuseEpiloguesPass
    : public mlir::twill::impl::FuseEpiloguesBase<FuseEpiloguesPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp function) {
      if (!function.isExternal())
        fuse(function);
    });
  }
};

} // namespace
