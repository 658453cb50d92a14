//===- FuseDequantize.cpp - the twill-fuse-dequantize pass ----------------===//

#include "passes/Passes.h"

#include "dialects/twill/TwillOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::twill {
#define GEN_PASS_DEF_FUSEDEQUANTIZE
#include "passes/Passes.h.inc"
} // namespace mlir::twill

using namespace mlir;
using namespace mlir::twill;

namespace {

/// Whether `matmul` reads `weight` as its rhs only, its lhs not transposed:
/// a product a backend can form the weight for a panel at a time.
bool fusable(MatmulOp matmul, Value weight) {
  return matmul.getRhs() == weight && matmul.getLhs() != weight &&
         matmul.getAddend() != weight && !matmul.getTransposeLhs();
}

/// `matmul` as a quantized_matmul of the parts `dequantize` forms its rhs
/// from; it replaces `matmul`.
void fuseInto(Operation *dequantize, MatmulOp matmul) {
  OpBuilder builder(matmul);
  auto nf4 = dyn_cast<DequantizeNf4Op>(dequantize);
  auto fused = QuantizedMatmulOp::create(
      builder, matmul.getLoc(), matmul.getType(), matmul.getLhs(),
      dequantize->getOperands(), matmul.getAddend(),
      nf4 ? nf4.getBlockSizeAttr() : IntegerAttr(),
      nf4 ? nf4.getNestedBlockSizeAttr() : IntegerAttr(),
      nf4 ? nf4.getRowsAttr() : IntegerAttr(),
      nf4 ? nf4.getColumnsAttr() : IntegerAttr(),
      nf4 ? nf4.getShardAxisAttr() : StringAttr(), matmul.getTransposeRhs(),
      matmul.getAlpha());
  // Which layer's forward or backward the product is, and whatever else is
  // said of it, stays on it.
  for (NamedAttribute attribute : matmul->getDiscardableAttrs())
    fused->setAttr(attribute.getName(), attribute.getValue());
  matmul.getResult().replaceAllUsesWith(fused.getResult());
  matmul->erase();
}

struct FuseDequantizePass
    : public mlir::twill::impl::FuseDequantizeBase<FuseDequantizePass> {
  void runOnOperation() override {
    SmallVector<Operation *> dequantizes;
    getOperation().walk([&](Operation *op) {
      if (isDequantize(op))
        dequantizes.push_back(op);
    });
    for (Operation *dequantize : dequantizes) {
      Value weight = dequantize->getResult(0);
      // A weight anything else reads (DoRA's norms, a block of its
      // columns) is formed whole, as it was.
      if (weight.use_empty() ||
          !llvm::all_of(weight.getUsers(), [&](Operation *user) {
            auto matmul = dyn_cast<MatmulOp>(user);
            return matmul && fusable(matmul, weight);
          }))
        continue;
      for (Operation *user : llvm::make_early_inc_range(weight.getUsers()))
        fuseInto(dequantize, cast<MatmulOp>(user));
      dequantize->erase();
    }
  }
};

} // namespace
