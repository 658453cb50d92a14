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

void fuse(func::FuncOp function) {
  // Scales first, so that an add then finds the scaled matmul.
  SmallVector<ScaleOp> scales(function.getOps<ScaleOp>());
  for (ScaleOp scale : scales)
    if (MatmulOp matmul = soleMatmul(scale.getInput()))
      refuse(matmul, scale,
             matmul.getAlpha().convertToDouble() *
                 scale.getFactor().convertToDouble(),
             Value());
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
