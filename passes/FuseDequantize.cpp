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

/// The round_to_fp8 whose blocks `lhs` holds whole: its result, or that
/// gathered (sequence parallelism rounds a rank's positions; a shard of the
/// last dim is whole blocks). None where anything else, a slice of the last
/// dim that may cut a block, comes between.
RoundToFp8Op roundedBlocksOf(Value lhs) {
  while (auto gather = lhs.getDefiningOp<AllGatherOp>())
    lhs = gather.getInput();
  return lhs.getDefiningOp<RoundToFp8Op>();
}

/// `matmul` as a quantized_matmul of the parts `dequantize` forms its rhs
/// from; it replaces `matmul`.
void fuseInto(Operation *dequantize, MatmulOp matmul) {
  OpBuilder builder(matmul);
  auto nf4 = dyn_cast<DequantizeNf4Op>(dequantize);
  // An FP8 weight's x W^T whose x is rounded to e4m3 in blocks: the
  // backend may multiply the codes.
  IntegerAttr lhsFp8Block;
  if (auto rounded = roundedBlocksOf(matmul.getLhs());
      rounded && !nf4 && matmul.getTransposeRhs())
    lhsFp8Block = rounded.getBlockSizeAttr();
  auto fused = QuantizedMatmulOp::create(
      builder, matmul.getLoc(), matmul.getType(), matmul.getLhs(),
      dequantize->getOperands(), matmul.getAddend(),
      nf4 ? nf4.getBlockSizeAttr() : IntegerAttr(),
      nf4 ? nf4.getNestedBlockSizeAttr() : IntegerAttr(),
      nf4 ? nf4.getRowsAttr() : IntegerAttr(),
      nf4 ? nf4.getColumnsAttr() : IntegerAttr(),
      nf4 ? nf4.getShardAxisAttr() : StringAttr(), matmul.getTransposeRhs(),
      matmul.getAlpha(), lhsFp8Block);
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
