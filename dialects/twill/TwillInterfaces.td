//===- TwillInterfaces.td - what passes know of each op ----*- tablegen -*-===//

#ifndef TWILL_INTERFACES_TD
#define TWILL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Twill_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::twill";
  let description = [{
    The op's reverse-mode rule: given the cotangents of its results, builds
    the cotangents of its operands. twill-autodiff calls it on every op
    between the trainable parameters and the loss, so it stays generic.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the cotangent of each
        operand whose entry in `needed` is true, from `resultCotangents` (one
        per result, null for a result nothing depends on). Returns one value
        per operand, null where not needed or not differentiable; fails,
        with a diagnostic, where the op has no rule for its form.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::ArrayRef<bool>":$needed)>
  ];
}

def Twill_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::twill";
  let description = [{
    The op's einsum-like factor rule (see ShardingRule.h): which index
    spaces its operands and results share, which it reduces over and which
    must stay whole. Sharding propagation and partitioning read only these.
  }];
  let methods = [
    InterfaceMethod<"The op's factor rule, sized by its operand types.",
      "::mlir::twill::ShardingRule", "getShardingRule", (ins)>
  ];
}

#endif // TWILL_INTERFACES_TD
