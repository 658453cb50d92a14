//===- TwillElementwiseOps.td - elementwise and column ops -*- tablegen -*-===//
//
// Binary and unary elementwise ops, LoRA's dropout, detach, DoRA's
// norms and columns scaled, and a bias's columns added.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_ELEMENTWISE_OPS_TD
#define TWILL_ELEMENTWISE_OPS_TD

class Twill_ElementwiseBinaryOp<string mnemonic, string formula,
                                list<Trait> traits = []>
    : Twill_ComputeOp<mnemonic, !listconcat(traits,
               [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>])> {
  let shapeRule = "binary";
  let sameElementType = ["lhs", "rhs", "result"];
  let verifier = "verifyShapeRule";
  let shardingRule = "elementwiseRule";
  let runner = "runElementwise";
  let description = "`result = " # formula # "`, elementwise; operands and "
    # "result have one shape and element type.\n\n```mlir\n%r = twill."
    # mnemonic # " %a, %b : (tensor<2x16xf32>, tensor<2x16xf32>) -> "
    # "tensor<2x16xf32>\n```";
  let arguments = (ins Twill_FloatTensor:$lhs, Twill_FloatTensor:$rhs);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_AddOp : Twill_ElementwiseBinaryOp<"add", "lhs + rhs",
                                            [Twill_Additive, Twill_ElementwiseInPlace]> {
  let opcode = 6;
  let summary = "Elementwise sum";
  // Floats, or counts (a tiled loss's token counts summed, or its
  // sequences').
  let arguments = (ins AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$lhs,
                       AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$rhs);
  let results = (outs AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$result);
}

def Twill_MulOp : Twill_ElementwiseBinaryOp<"mul", "lhs * rhs",
                                            [Twill_Multilinear]> {
  let opcode = 7;
  let summary = "Elementwise product";
}

def Twill_SwigluOp : Twill_ElementwiseBinaryOp<"swiglu",
                                               "silu(lhs) * rhs"> {
  let opcode = 9;
  let summary = "SwiGLU gate: silu(gate) * up";
}

def Twill_GegluOp : Twill_ElementwiseBinaryOp<"geglu",
                                              "gelu_tanh(lhs) * rhs"> {
  let opcode = 54;
  let summary = "GeGLU gate (Gemma's): gelu(gate) * up, GELU's tanh form";
}

def Twill_SigmoidGateOp : Twill_ElementwiseBinaryOp<"sigmoid_gate",
                                                    "sigmoid(lhs) * rhs"> {
  let opcode = 72;
  let summary = "Sigmoid gate: sigmoid(gate) * up (Qwen2-MoE's shared expert)";
}

def Twill_ScaleOp : Twill_ComputeOp<"scale", [Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let opcode = 10;
  let shardingRule = "elementwiseRule";
  let executableAttributes = Twill_ScaleAttributes;
  let runner = "runElementwise";
  let shapeRule = "unary";
  let verifier = "verifyShapeRule";
  let summary = "Multiplication by a constant";
  let description = [{
    `result = input * factor`; LoRA's `alpha / rank` is one.

    ```mlir
    %s = twill.scale %d by 2.0 : tensor<2x8192x4096xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
}

def Twill_SoftcapOp : Twill_ComputeOp<"softcap", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let opcode = 56;
  let shardingRule = "elementwiseRule";
  let executableAttributes = Twill_SoftcapAttributes;
  let runner = "runElementwise";
  let shapeRule = "unary";
  let gradients = [Twill_GradientOf<"input", "Twill_SoftcapGradOp">];
  let summary = "Soft-capping: cap * tanh(input / cap), elementwise";
  let description = [{
    Gemma 2's final logits, squashed into (-cap, cap).

    ```mlir
    %c = twill.softcap %logits cap 3.0e+01 : tensor<2x64x256000xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, F64Attr:$cap);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input `cap` $cap attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Twill_DropoutOp : Twill_ComputeOp<"dropout", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 48;
  let executableAttributes = Twill_DropoutAttributes;
  let runner = "runDropout";
  let summary = "LoRA's dropout, the same mask on every mesh";
  let description = [{
    `result = input * keep / (1 - rate)` for an input laid out
    `[batch, seq, features]`, where `keep` of feature `f` of the token at
    `tokens[b, s]` (its row x seq_len + position in the micro-batch) comes
    from Philox4x32-10 keyed by `seed` and `stream` (the adapted module's)
    and counted by `micro_batch` (support/Dropout.h). The mask depends only
    on those, never on the rank or the order, so its gradient is the same
    dropout of the incoming gradient, and a recomputation drops the same
    elements. Only `@train_step` keeps it: `twill-autodiff` removes it from
    `@forward`, which evaluates.

    ```mlir
    %d = twill.dropout %x tokens(%index) micro_batch(%micro)
        {rate = 0.1 : f64, seed = 0 : i64, stream = 1234 : i64}
        : (tensor<2x8192x4096xbf16>, tensor<2x8192xi32>, tensor<i64>) -> tensor<2x8192x4096xbf16>
    ```

    After partitioning, `shard_axis` says the features are this rank's
    block along that mesh axis: feature `f` is global feature
    `coordinate * features + f`.
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_IntTensor:$tokens,
                       0DTensorOf<[I64]>:$micro_batch, F64Attr:$rate,
                       I64Attr:$seed, I64Attr:$stream,
                       OptionalAttr<StrAttr>:$shard_axis);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `tokens` `(` $tokens `)` `micro_batch` `(` $micro_batch `)`
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_DetachOp : Twill_Op<"detach", [Pure, AllTypesMatch<["input", "result"]>]> {
  let opcode = 0; // twill-autodiff removes every detach
  let runner = "";
  let summary = "A value the gradient does not flow through";
  let description = [{
    `result = input`, treated as a constant by `twill-autodiff`: nothing
    upstream of it gets a cotangent through it. DoRA's weight norm is one
    (its paper, section 4.3, and PEFT detach it). `twill-autodiff` removes
    every detach once the reverse pass is built: no later pass sees one.

    ```mlir
    %c = twill.detach %n : tensor<4096xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Twill_RowSumSquaresOp : Twill_ComputeOp<"row_sum_squares", [Pure]> {
  let opcode = 49;
  let runner = "runColumns";
  let shapeRule = "rowSumSquares";
  let sameElementType = ["input", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Sum of squares along the last dim";
  let description = [{
    `result[i...] = sum over k of input[i..., k]^2`, summed in fp32. Split
    over its last dim, each rank's result is a partial sum. Without a
    gradient rule: it serves a detached norm (DoRA's).

    ```mlir
    %s = twill.row_sum_squares %w : tensor<4096x14336xf32> -> tensor<4096xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Twill_ScaleColumnsOp : Twill_ComputeOp<"scale_columns", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 50;
  let runner = "runColumns";
  let shapeRule = "scaleColumns";
  let sameElementType = ["input", "scale", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Each column scaled by its own factor";
  let description = [{
    `result[i..., n] = input[i..., n] * scale[n]`: DoRA's magnitude over the
    weight norm, applied to a layer's outputs.

    ```mlir
    %y = twill.scale_columns %x, %s : (tensor<2x64x4096xf32>, tensor<4096xf32>) -> tensor<2x64x4096xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$scale);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_AddColumnsOp : Twill_ComputeOp<"add_columns", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 52;
  let runner = "runColumns";
  let shapeRule = "addColumns";
  let sameElementType = ["input", "bias", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Each column shifted by its own term: a linear layer's bias";
  let description = [{
    `result[i..., n] = input[i..., n] + bias[n]`. The bias shards with the
    columns; added to a partial sum it would be counted once per rank, so
    its sharding rule (elementwise in the input) has the input reduced first.

    ```mlir
    %y = twill.add_columns %x, %b : (tensor<2x64x4096xf32>, tensor<4096xf32>) -> tensor<2x64x4096xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$bias);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

#endif // TWILL_ELEMENTWISE_OPS_TD
