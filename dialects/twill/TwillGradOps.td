//===- TwillGradOps.td - gradient ops and constants --------*- tablegen -*-===//
//
// The ops twill-autodiff emits where a forward op's rule needs more than the
// forward ops: each computes one backward step of one forward op.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_GRAD_OPS_TD
#define TWILL_GRAD_OPS_TD

def Twill_ConstantOp : Twill_ComputeOp<"constant", [Twill_ElementwiseInPlace, Pure]> {
  let opcode = 15;
  let executableAttributes = Twill_ConstantAttributes;
  let runner = "runConstant";
  let summary = "A tensor with every element set to one value";
  let description = [{
    ```mlir
    %one = twill.constant 1.0 : tensor<f32>
    %zeros = twill.constant 0.0 : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Twill_EmbeddingGradOp : Twill_ComputeOp<"embedding_grad", [Pure]> {
  let opcode = 16;
  let runner = "runEmbeddingGrad";
  let cudaRunsBf16 = 0;
  let shapeRule = "embeddingGrad";
  let sameElementType = ["grad", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Gradient of an embedding table";
  let description = [{
    `result[v, :] = sum of grad[i..., :] over the positions i whose id is v`:
    a `[vocab, hidden]` table, zero for ids that do not occur.

    ```mlir
    %d = twill.embedding_grad %tokens, %dh
        : (tensor<2x64xi32>, tensor<2x64x64xf32>) -> tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Twill_IntTensor:$ids, Twill_FloatTensor:$grad);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_RmsNormGradOp : Twill_ComputeOp<"rms_norm_grad", [Pure]> {
  let opcode = 17;
  let executableAttributes = Twill_RmsNormAttributes;
  let runner = "runRmsNormFamily";
  let shapeRule = "rmsNormGrad";
  let sameElementType = ["input", "weight", "grad", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Gradient of rms_norm with respect to its input";
  let description = [{
    For `y = rms_norm(x, w)` and `grad` = dL/dy, returns dL/dx.

    ```mlir
    %dx = twill.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-05 : f64}
        : (tensor<2x64x64xf32>, tensor<64xf32>, tensor<2x64x64xf32>) -> tensor<2x64x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$weight,
                       Twill_FloatTensor:$grad, F64Attr:$epsilon);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
}

def Twill_RmsNormWeightGradOp : Twill_ComputeOp<"rms_norm_weight_grad", [Pure]> {
  let opcode = 18;
  let executableAttributes = Twill_RmsNormAttributes;
  let runner = "runRmsNormFamily";
  let shapeRule = "rmsNormWeightGrad";
  let sameElementType = ["input", "grad", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Gradient of rms_norm with respect to its weight";
  let description = [{
    For `y = rms_norm(x, w)` and `grad` = dL/dy, returns dL/dw: the sum over
    rows of `grad * x / sqrt(mean(x^2) + epsilon)`. Emitted only for a
    trainable weight.

    ```mlir
    %dw = twill.rms_norm_weight_grad %x, %dy {epsilon = 1.0e-05 : f64}
        : (tensor<2x64x64xf32>, tensor<2x64x64xf32>) -> tensor<64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$grad,
                       F64Attr:$epsilon);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_RopeGradOp : Twill_ComputeOp<"rope_grad", [Pure]> {
  let opcode = 19;
  let executableAttributes = Twill_RopeAttributes;
  let runner = "runRope";
  let shapeRule = "rope";
  let sameElementType = ["grad", "result"];
  let summary = "Gradient of rope: the inverse rotation";
  let description = [{
    Rotates `grad` by the negated angles of the `rope` with the same
    attributes, which is rope's gradient since a rotation's transpose is
    its inverse.

    ```mlir
    %dq = twill.rope_grad %dr, %pos {theta = 5.0e+05 : f64}
        : (tensor<2x64x4x16xf32>, tensor<2x64xi32>) -> tensor<2x64x4x16xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$grad, Twill_IntTensor:$positions,
                       F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_position);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_AttentionGradOp : Twill_ComputeOp<"attention_grad", [Pure]> {
  let opcode = 20;
  let executableAttributes = Twill_AttentionAttributes;
  let runner = "runAttentionGrad";
  let summary = "Gradients of attention with respect to q, k and v";
  let description = [{
    For `output, log_sum_exp = attention(query, key, value, segments)` and
    `grad` = dL/doutput, returns (dL/dquery, dL/dkey, dL/dvalue). The
    probabilities are remade from the scores and the forward's
    `log_sum_exp`, never stored. `shard_axis`, `window` and `softcap` are
    as for attention; with `shard_axis` the key and value gradients are
    partial sums over the axis.

    ```mlir
    %dq, %dk, %dv = twill.attention_grad %q, %k, %v, %o, %lse, %do segments(%doc)
        {scale = 2.5e-01 : f64}
        : (tensor<2x64x4x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>,
           tensor<2x64x4x16xf32>, tensor<2x4x64xf32>, tensor<2x64x4x16xf32>,
           tensor<2x64xi32>)
        -> (tensor<2x64x4x16xf32>, tensor<2x64x2x16xf32>, tensor<2x64x2x16xf32>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$query, Twill_FloatTensor:$key,
                       Twill_FloatTensor:$value, Twill_FloatTensor:$output,
                       StaticShapeTensorOf<[F32]>:$log_sum_exp,
                       Twill_FloatTensor:$grad,
                       Optional<Twill_IntTensor>:$segments, F64Attr:$scale,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Twill_FloatTensor:$query_grad,
                      Twill_FloatTensor:$key_grad,
                      Twill_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $log_sum_exp `,` $grad
    (`segments` `(` $segments^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

// The gradients of a gated activation (swiglu, geglu, sigmoid_gate) with
// respect to gate and up.
class Twill_GatedGradOp<string mnemonic, string forward>
    : Twill_ComputeOp<mnemonic, [Pure]> {
  let shapeRule = "gatedGrad";
  let verifier = "verifyShapeRule";
  let shardingRule = "elementwiseRule";
  let runner = "runElementwise";
  let summary = "Gradients of " # mnemonic # " with respect to gate and up";
  let description = "For `y = " # forward # "` and `grad` = dL/dy, returns "
    # "(dL/dgate, dL/dup).\n\n```mlir\n%dg, %du = twill." # mnemonic
    # " %g, %u, %dy\n    : (tensor<2x64x160xf32>, tensor<2x64x160xf32>, "
    # "tensor<2x64x160xf32>)\n    -> (tensor<2x64x160xf32>, "
    # "tensor<2x64x160xf32>)\n```";
  let arguments = (ins Twill_FloatTensor:$gate, Twill_FloatTensor:$up,
                       Twill_FloatTensor:$grad);
  let results = (outs Twill_FloatTensor:$gate_grad,
                      Twill_FloatTensor:$up_grad);
  let assemblyFormat = [{
    $gate `,` $up `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_SwigluGradOp : Twill_GatedGradOp<"swiglu_grad", "silu(gate) * up"> {
  let opcode = 21;
}
def Twill_GegluGradOp : Twill_GatedGradOp<"geglu_grad",
                                          "gelu_tanh(gate) * up"> {
  let opcode = 55;
}
def Twill_SigmoidGateGradOp : Twill_GatedGradOp<"sigmoid_gate_grad",
                                                "sigmoid(gate) * up"> {
  let opcode = 73;
}

def Twill_ScaleColumnsGradOp : Twill_ComputeOp<"scale_columns_grad", [Pure]> {
  let opcode = 51;
  let runner = "runColumns";
  let shapeRule = "scaleColumnsGrad";
  let sameElementType = ["input", "scale", "grad", "input_grad", "scale_grad"];
  let verifier = "verifyShapeRule";
  let summary = "Gradients of scale_columns with respect to input and scale";
  let description = [{
    For `y = scale_columns(x, s)` and `grad` = dL/dy, returns
    (dL/dx = scale_columns(grad, s), dL/ds[n] = sum over i... of
    grad[i..., n] * x[i..., n]).

    ```mlir
    %dx, %ds = twill.scale_columns_grad %x, %s, %dy
        : (tensor<2x64x4096xf32>, tensor<4096xf32>, tensor<2x64x4096xf32>)
        -> (tensor<2x64x4096xf32>, tensor<4096xf32>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$scale,
                       Twill_FloatTensor:$grad);
  let results = (outs Twill_FloatTensor:$input_grad,
                      Twill_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_ColumnSumsOp : Twill_ComputeOp<"column_sums", [Pure]> {
  let opcode = 53;
  let runner = "runColumns";
  let shapeRule = "columnSums";
  let sameElementType = ["input", "result"];
  let verifier = "verifyShapeRule";
  let summary = "Each column summed over every row: add_columns' bias gradient";
  let description = [{
    `result[n] = sum over i... of input[i..., n]`, summed in fp32. Sharded
    rows give partial sums.

    ```mlir
    %db = twill.column_sums %dy : tensor<2x64x4096xf32> -> tensor<4096xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Twill_SoftcapGradOp : Twill_ComputeOp<"softcap_grad", [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let opcode = 57;
  let shardingRule = "elementwiseRule";
  let executableAttributes = Twill_SoftcapAttributes;
  let runner = "runElementwise";
  let shapeRule = "binary";
  let summary = "Gradient of softcap with respect to its input";
  let description = [{
    For `y = softcap(x, cap)` and `grad` = dL/dy, returns
    `grad * (1 - tanh(x / cap)^2)`.

    ```mlir
    %dx = twill.softcap_grad %x, %dy cap 3.0e+01 : tensor<2x64x256000xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$grad,
                       F64Attr:$cap);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `cap` $cap attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Twill_CrossEntropyGradOp : Twill_ComputeOp<"cross_entropy_grad", [Twill_VocabParallelLossOpInterface, Pure]> {
  let opcode = 22;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runCrossEntropyFamily";
  let summary = "Gradient of the summed cross-entropy with respect to logits";
  let description = [{
    `(softmax(logits) - onehot(label)) * grad` on counted positions, zero on
    positions whose label is `ignore_index`; `grad` is the 0-d cotangent of
    the loss sum, or with `sequences` each row's sequences' (`[rows...,
    sequence_count]`: a position takes its sequence's). `shard_axis`,
    `vocab_size` and the sequences are as for cross_entropy.

    ```mlir
    %dl = twill.cross_entropy_grad %logits, %labels, %one {ignore_index = -100 : i64}
        : (tensor<2x64x512xf32>, tensor<2x64xi32>, tensor<f32>) -> tensor<2x64x512xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_IntTensor:$labels,
                       StaticShapeTensorOf<[AnyFloat]>:$grad,
                       Optional<Twill_IntTensor>:$sequences,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`sequences` `(` $sequences^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The logits' last dim is the vocab.
    std::pair<::mlir::Value, unsigned> getVocabSpan() {
      return {getLogits(), getLogits().getType().getRank() - 1};
    }
  }];
}

def Twill_DpoLossGradOp : Twill_ComputeOp<"dpo_loss_grad", [Pure]> {
  let opcode = 63;
  let executableAttributes = Twill_DpoLossAttributes;
  let runner = "runDpoLoss";
  let cudaRunsBf16 = 0;
  let summary = "Gradient of dpo_loss's loss sum with respect to the policy's";
  let description = [{
    `grad` (the 0-d cotangent of the loss sum) times each counted pair's
    derivative with respect to its policy log-probabilities (support/Dpo.h);
    zero for a pair without a token in each completion. Operands and
    attributes are dpo_loss's.

    ```mlir
    %dp = twill.dpo_loss_grad %policy, %reference, %tokens, %one
        {loss_type = "ipo", beta = 1.0e-01 : f64}
        : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>, tensor<f32>) -> tensor<4x2xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$policy,
                       StaticShapeTensorOf<[F32]>:$reference,
                       StaticShapeTensorOf<[I64]>:$tokens,
                       0DTensorOf<[F32]>:$grad,
                       StrAttr:$loss_type, F64Attr:$beta,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $policy `,` $reference `,` $tokens `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_LinearCrossEntropyGradOp : Twill_ComputeOp<"linear_cross_entropy_grad", [Twill_VocabParallelLossOpInterface, Pure]> {
  let opcode = 41;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runLinearCrossEntropy";
  let summary = "Gradient of linear_cross_entropy's loss sum, tile by tile";
  let description = [{
    The gradient of linear_cross_entropy's loss sum (`grad` its 0-d
    cotangent, or with `sequences` its sums') with respect to `input`, or
    with `wrt_weight` to `weight`:
    for each `tile_rows` positions the logits are formed again in `tile`,
    made their cross_entropy_grad in place, and multiplied by the weight
    (or, summed over the tiles, by the input's rows). Without a
    shard_axis's block of the vocab the input gradient is a partial sum
    over it. With `softcap` the tile is capped as the forward's, and its
    gradient scaled by the cap's derivative, 1 - (capped / softcap)^2.

    ```mlir
    %dh, %tile = twill.linear_cross_entropy_grad %h, %w, %labels, %one {ignore_index = -100 : i64}
        : (tensor<1x65536x4096xbf16>, tensor<128256x4096xbf16>, tensor<1x65536xi32>, tensor<f32>)
        -> (tensor<1x65536x4096xbf16>, tensor<8192x128256xbf16>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$weight,
                       Twill_IntTensor:$labels,
                       StaticShapeTensorOf<[AnyFloat]>:$grad,
                       Optional<Twill_IntTensor>:$sequences,
                       UnitAttr:$wrt_weight,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs Twill_FloatTensor:$result, Twill_FloatTensor:$tile);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels `,` $grad (`sequences` `(` $sequences^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The weight's rows are the vocab.
    std::pair<::mlir::Value, unsigned> getVocabSpan() { return {getWeight(), 0}; }
  }];
}

#endif // TWILL_GRAD_OPS_TD
