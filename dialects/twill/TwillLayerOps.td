//===- TwillLayerOps.td - the layers' ops ------------------*- tablegen -*-===//
//
// Embedding, matmul, RMS norm, RoPE and attention: a decoder layer's
// computations, in the forward pass (their gradients: TwillGradOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_LAYER_OPS_TD
#define TWILL_LAYER_OPS_TD

def Twill_EmbeddingOp : Twill_ComputeOp<"embedding", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 1;
  let executableAttributes = Twill_EmbeddingAttributes;
  let runner = "runEmbedding";
  let shapeRule = "embedding";
  let sameElementType = ["table", "result"];
  let verifier = "verifyShapeRule";
  let gradients = [Twill_GradientOf<"table", "Twill_EmbeddingGradOp">];
  let summary = "Rows of an embedding table selected by token ids";
  let description = [{
    `result[i..., :] = table[ids[i...], :]` for a `[vocab, hidden]` table.

    ```mlir
    %h = twill.embedding %table, %tokens
        : (tensor<128256x4096xbf16>, tensor<2x8192xi32>) -> tensor<2x8192x4096xbf16>
    ```

    After partitioning, `shard_axis` says the table holds this rank's block of
    rows along that mesh axis (vocab-parallel): ids outside the block give
    zeros, a partial sum over the axis.
  }];
  let arguments = (ins Twill_FloatTensor:$table, Twill_IntTensor:$ids,
                       OptionalAttr<StrAttr>:$shard_axis);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
}

def Twill_MatmulOp : Twill_ComputeOp<"matmul", [Twill_Costly, Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 2;
  let executableAttributes = Twill_MatmulAttributes;
  let runner = "runMatmul";
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `result[b..., m, n] = sum_k lhs[b..., m, k] * rhs[b..., k, n]`. The last
    two dims of each operand are the matrix; `transpose_lhs` / `transpose_rhs`
    read an operand as `[.., k, m]` / `[.., n, k]`. Leading dims of `lhs` are
    batch dims; `rhs` either has the same batch dims or none (a weight shared
    by the whole batch). A matrix result from batched operands (with
    `transpose_lhs`, without `transpose_rhs`) sums over the batch dims too:
    the gradient of a shared weight. A linear layer `x W^T` is:

    ```mlir
    %q = twill.matmul %x, %w {transpose_rhs}
        : (tensor<2x8192x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<2x8192x4096xbf16>
    ```

    After partitioning, twill-fuse-epilogues folds a following scale into
    `alpha` and a following add into `addend`:
    `result = alpha * (lhs x rhs) + addend`, one pass over the result (a
    GEMM's epilogue) where there were three.

    ```mlir
    %y = twill.matmul %d, %b plus %base {alpha = 2.0 : f64, transpose_rhs}
        : (tensor<2x8192x16xbf16>, tensor<4096x16xbf16>, tensor<2x8192x4096xbf16>)
          -> tensor<2x8192x4096xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$lhs, Twill_FloatTensor:$rhs,
                       Optional<Twill_FloatTensor>:$addend,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`plus` $addend^)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    // A plain product, without epilogue.
    OpBuilder<(ins "Type":$result, "Value":$lhs, "Value":$rhs,
                   CArg<"bool", "false">:$transposeLhs,
                   CArg<"bool", "false">:$transposeRhs), [{
      build($_builder, $_state, result, lhs, rhs, /*addend=*/Value(),
            transposeLhs, transposeRhs, ::llvm::APFloat(1.0));
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether twill-fuse-epilogues gave it a scale or an addend.
    bool hasEpilogue() { return getAddend() || getAlpha().convertToDouble() != 1.0; }
  }];
  let hasVerifier = 1;
}

def Twill_RmsNormOp : Twill_ComputeOp<"rms_norm", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 3;
  let executableAttributes = Twill_RmsNormAttributes;
  let runner = "runRmsNormFamily";
  let shapeRule = "rmsNorm";
  let sameElementType = ["input", "weight", "result"];
  let gradients = [
    Twill_GradientOf<"input", "Twill_RmsNormGradOp">,
    Twill_GradientOf<"weight", "Twill_RmsNormWeightGradOp">];
  let summary = "Root-mean-square normalisation over the last dim";
  let description = [{
    `result = input / sqrt(mean(input^2, -1) + epsilon) * weight`, with the
    mean taken over the last dim and `weight` of that dim's size.

    ```mlir
    %n = twill.rms_norm %h, %w {epsilon = 1.0e-05 : f64}
        : (tensor<2x8192x4096xbf16>, tensor<4096xbf16>) -> tensor<2x8192x4096xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$weight,
                       F64Attr:$epsilon);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_RopeOp : Twill_ComputeOp<"rope", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 4;
  let executableAttributes = Twill_RopeAttributes;
  let runner = "runRope";
  let shapeRule = "rope";
  let sameElementType = ["input", "result"];
  let gradients = [Twill_GradientOf<"input", "Twill_RopeGradOp">];
  let summary = "Rotary position embedding of queries or keys";
  let description = [{
    Rotates each head of `input` (`[batch, seq, heads, head_dim]`) by angles
    `position * theta^(-2i / head_dim)`, pairing element `i` with
    `i + head_dim / 2` as Hugging Face's Llama does. `positions`
    (`[batch, seq]`) restart at 0 for each document of a packed row.

    With `scaling_factor` alone, every frequency is divided by it (linear
    scaling). With `scaling_factor` and `low_freq_factor`,
    `high_freq_factor` and `original_max_position`, the frequencies get
    Llama 3.1's `rope_type = "llama3"` scaling: wavelengths longer than
    `original_max_position / low_freq_factor` are divided by
    `scaling_factor`, those shorter than `original_max_position /
    high_freq_factor` are kept, and those between are interpolated.

    ```mlir
    %r = twill.rope %q, %pos {theta = 5.0e+05 : f64, scaling_factor = 8.0 : f64,
            low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64,
            original_max_position = 8192 : i64}
        : (tensor<2x8192x32x128xbf16>, tensor<2x8192xi32>) -> tensor<2x8192x32x128xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_IntTensor:$positions,
                       F64Attr:$theta,
                       OptionalAttr<F64Attr>:$scaling_factor,
                       OptionalAttr<F64Attr>:$low_freq_factor,
                       OptionalAttr<F64Attr>:$high_freq_factor,
                       OptionalAttr<I64Attr>:$original_max_position);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_AttentionOp : Twill_ComputeOp<"attention", [Twill_Costly, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 5;
  let executableAttributes = Twill_AttentionAttributes;
  let runner = "runAttention";
  let summary = "Causal grouped-query attention, within documents";
  let description = [{
    `softmax(scale * q k^T + mask) v` per head, where query head `h` reads key
    and value head `h / (q_heads / kv_heads)` (grouped-query attention). The
    mask is causal and, when `segments` (`[batch, seq]` document ids) is
    given, also forbids attending across documents of a packed row. Layout is
    `[batch, seq, heads, head_dim]` for all three inputs and the result.

    The second result, `log_sum_exp` (`[batch, heads, seq]`, fp32 at every
    precision), is each query row's log-sum-exp of its logits (natural log,
    after the scale and the soft cap, over the keys it sees): the softmax's
    statistics, which attention_grad reads to remake the probabilities
    without a second pass over each row (cuDNN's `Stats`).

    ```mlir
    %o, %lse = twill.attention %q, %k, %v segments(%doc) {scale = 0.08838834764831845 : f64}
        : (tensor<2x8192x32x128xbf16>, tensor<2x8192x8x128xbf16>,
           tensor<2x8192x8x128xbf16>, tensor<2x8192xi32>)
        -> (tensor<2x8192x32x128xbf16>, tensor<2x32x8192xf32>)
    ```

    With `window` (sliding-window attention), a query sees only the keys
    less than `window` positions before it: itself and the `window - 1`
    before. With `softcap` (Gemma 2's), each scaled score `s` becomes
    `softcap * tanh(s / softcap)` before the softmax.

    After partitioning, `shard_axis` says the query heads are this rank's
    block along that mesh axis while key and value hold every head (fewer
    key/value heads than ranks): query head `h` is global head
    `coordinate * heads + h`.
  }];
  let arguments = (ins Twill_FloatTensor:$query, Twill_FloatTensor:$key,
                       Twill_FloatTensor:$value,
                       Optional<Twill_IntTensor>:$segments, F64Attr:$scale,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$window,
                       OptionalAttr<F64Attr>:$softcap);
  let results = (outs Twill_FloatTensor:$result,
                      StaticShapeTensorOf<[F32]>:$log_sum_exp);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`segments` `(` $segments^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // TWILL_LAYER_OPS_TD
