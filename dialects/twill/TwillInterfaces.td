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

def Twill_VocabParallelLossOpInterface
    : OpInterface<"VocabParallelLossOpInterface"> {
  let cppNamespace = "::mlir::twill";
  let description = [{
    A loss op (or its gradient) that reduces a vocab split over a mesh axis
    itself, given `shard_axis` and `vocab_size` after partitioning: the
    vocab is never gathered. Partitioning and the resource report read it.
  }];
  let methods = [
    InterfaceMethod<"The labels it reads.", "::mlir::Value", "getLabels", (ins)>,
    InterfaceMethod<"Where its vocab is: a value and its dim.",
      "std::pair<::mlir::Value, unsigned>", "getVocabSpan", (ins)>
  ];
}

// Traits: what passes know of an op by its kind, beside its interfaces
// (their C++ in TwillTraits.h).
class Twill_Trait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::mlir::OpTrait::twill";
}
// Recomputing it costs about what keeping its result does (a product, an
// attention, a transfer between ranks): selective checkpointing keeps it.
def Twill_Costly : Twill_Trait<"Costly">;
// Linear in each operand alone: with one operand a partial sum over an
// axis and the others whole (or with its one operand partial), its result
// is a partial sum.
def Twill_Multilinear : Twill_Trait<"Multilinear">;
// With every operand a partial sum, its result is one (sums, and partial
// sums put side by side).
def Twill_Additive : Twill_Trait<"Additive">;
// Forms a quantized weight in the compute dtype; its first operand is the
// parameter it reads.
def Twill_Dequantize : Twill_Trait<"Dequantize">;
// Each element of its results is computed from the same element of its
// operands, read before that element of any result is written: a result
// may take the buffer of an operand read for the last time (the emitter
// updates a state in place so).
def Twill_ElementwiseInPlace : Twill_Trait<"ElementwiseInPlace">;
// Its float results are sums kept in fp32 whatever the compute dtype (a
// loss's, a router's load): twill-mixed-precision leaves them so.
def Twill_Fp32Sums : Twill_Trait<"Fp32Sums">;

#endif // TWILL_INTERFACES_TD
