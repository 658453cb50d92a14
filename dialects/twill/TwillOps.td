//===- TwillOps.td - mesh and forward ops ------------------*- tablegen -*-===//
//
// Shapes in the examples are global (before partitioning). Verifiers check
// shapes and element types; placements are checked against their mesh by
// every op (see Twill_Op) and, later, against each op's sharding rule.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_OPS_TD
#define TWILL_OPS_TD

include "dialects/twill/TwillAttrs.td"
include "dialects/twill/TwillInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Twill_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;

// An op that computes (every op but the mesh and the collectives): it has a
// sharding rule.
class Twill_ComputeOp<string mnemonic, list<Trait> traits = []>
    : Twill_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<Twill_ShardingRuleOpInterface>])>;
def Twill_IntTensor : StaticShapeTensorOf<[AnySignlessInteger]>;
def Twill_Tensor : StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Twill_MeshOp : Op<Twill_Dialect, "mesh", [Symbol]> {
  let summary = "A named grid of devices";
  let description = [{
    Declares the device mesh that placements refer to: named axes and their
    sizes, major axis first, and what each axis parallelises (`roles`, one
    `#twill.axis<data|tensor>` per axis, each at most once): the sharding
    plan's fully sharded data parallel and tensor (and sequence) parallel
    axes. The frontend names them `dp` and `tp`; nothing reads the names.

    ```mlir
    twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4], roles = [#twill.axis<data>, #twill.axis<tensor>]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axes,
                       I64ArrayAttr:$shape,
                       OptionalAttr<TypedArrayAttrBase<Twill_AxisRoleAttr,
                                                       "axis roles">>:$roles);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The size of each axis, major first.
    ::llvm::SmallVector<int64_t> getAxisSizes();
    /// The role of axis `index`, if the mesh gives it one.
    std::optional<AxisRole> roleOf(size_t index);
    /// The index of the axis that is `role`, if any.
    std::optional<size_t> axisOf(AxisRole role);
  }];
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Twill_EmbeddingOp : Twill_ComputeOp<"embedding", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 1;
  let executableAttributes = Twill_EmbeddingAttributes;
  let runner = "runEmbedding";
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
  let hasVerifier = 1;
}

def Twill_MatmulOp : Twill_ComputeOp<"matmul", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
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

def Twill_AttentionOp : Twill_ComputeOp<"attention", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
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

class Twill_ElementwiseBinaryOp<string mnemonic, string formula>
    : Twill_ComputeOp<mnemonic,
               [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let verifier = "verifyElementwiseBinary";
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

def Twill_AddOp : Twill_ElementwiseBinaryOp<"add", "lhs + rhs"> {
  let opcode = 6;
  let summary = "Elementwise sum";
  // Floats, or counts (a tiled loss's token counts summed, or its
  // sequences').
  let arguments = (ins AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$lhs,
                       AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$rhs);
  let results = (outs AnyTypeOf<[Twill_FloatTensor, StaticShapeTensorOf<[I64]>]>:$result);
}

def Twill_MulOp : Twill_ElementwiseBinaryOp<"mul", "lhs * rhs"> {
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

def Twill_ScaleOp : Twill_ComputeOp<"scale", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let opcode = 10;
  let shardingRule = "elementwiseRule";
  let executableAttributes = Twill_ScaleAttributes;
  let runner = "runElementwise";
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

def Twill_DequantizeNf4Op : Twill_ComputeOp<"dequantize_nf4", [Pure]> {
  let opcode = 58;
  let executableAttributes = Twill_DequantizeNf4Attributes;
  let runner = "runDequantizeNf4";
  let summary = "A frozen weight stored in NF4, in the compute dtype";
  let description = [{
    bitsandbytes' NF4 with double quantization, as QLoRA stores a frozen
    base: the `[rows, columns]` weight cut into blocks of `block_size`
    values along its rows; value `i` of block `b` is `NF4[code_i] *
    scale_b`, its 4-bit code in `codes` (two a byte, the first in the high
    nibble), and `scale_b = DYNAMIC[absmax_b] * nested[b /
    nested_block_size] + offset`, `absmax_b` the block's 8-bit code of
    bitsandbytes' signed dynamic map and `nested` the whole weight's. The
    operands are the parameters `#twill.quantized` names; the result is
    formed right before the products that read it (twill-autodiff forms it
    again for the backward), so no full-precision copy outlives them. The
    weight is frozen: no gradient flows into the codes.

    ```mlir
    %w = twill.dequantize_nf4 %codes absmax(%absmax) nested(%nested, %offset)
        {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 4096 : i64, columns = 4096 : i64}
        : (tensor<4096x2048xi8>, tensor<4096x64xi8>, tensor<1024xf32>, tensor<f32>) -> tensor<4096x4096xbf16>
    ```

    `rows` and `columns` are the whole weight's. After partitioning,
    `shard_axis` says the result is this rank's block along that mesh
    axis, of rows or of whole blocks of columns; the sharding rule splits
    the columns only where the axis divides the blocks.
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$codes,
                       StaticShapeTensorOf<[I8]>:$absmax,
                       StaticShapeTensorOf<[F32]>:$nested,
                       0DTensorOf<[F32]>:$offset, I64Attr:$block_size,
                       I64Attr:$nested_block_size, I64Attr:$rows,
                       I64Attr:$columns, OptionalAttr<StrAttr>:$shard_axis);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $codes `absmax` `(` $absmax `)` `nested` `(` $nested `,` $offset `)`
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_DequantizeFp8Op : Twill_ComputeOp<"dequantize_fp8", [Pure]> {
  let opcode = 59;
  let runner = "runDequantizeFp8";
  let summary = "A frozen weight stored in FP8, in the compute dtype";
  let description = [{
    `result[r, c] = E4M3[values[r, c]] * scales[r]`: each value an e4m3
    byte (torch's float8_e4m3fn) and each row's scale its largest
    magnitude over 448, as the runtime quantizes a weight on load. The
    operands are the parameters `#twill.quantized` names; as for
    `twill.dequantize_nf4`, the result is formed right before its products
    and again for the backward, and no gradient flows into the values. A
    rank's block of rows or columns needs no offset: every value is its
    own.

    ```mlir
    %w = twill.dequantize_fp8 %values scales(%scales)
        : (tensor<4096x4096xi8>, tensor<4096xf32>) -> tensor<4096x4096xbf16>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$values,
                       StaticShapeTensorOf<[F32]>:$scales);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $values `scales` `(` $scales `)` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_RoundToFp8Op : Twill_ComputeOp<"round_to_fp8", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 61;
  let executableAttributes = Twill_RoundToFp8Attributes;
  let runner = "runRoundToFp8";
  let summary = "A product's input rounded to e4m3 in blocks of its last dim";
  let description = [{
    Each row of `input` (its last dim) cut into blocks of `block_size`
    values (the last one shorter where the size does not divide the dim),
    each block rounded to e4m3 over its scale `s`, its largest magnitude
    over 448: `result = E4M3(input / s) * s` (support/Fp8.h's
    roundInBlock), what an FP8 GEMM multiplies
    (`quantization.fp8_inputs: E4M3_BLOCKS`). The gradient passes it as it
    is (straight through). A rank holds whole blocks of the last dim, or
    all of it: its blocks are the whole input's.

    ```mlir
    %r = twill.round_to_fp8 %x block 128
        : (tensor<2x8x256xbf16>) -> tensor<2x8x256xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, I64Attr:$block_size);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `block` $block_size attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_QuantizedMatmulOp : Twill_Op<"quantized_matmul", [Pure, AttrSizedOperandSegments]> {
  let opcode = 60;
  let executableAttributes = Twill_QuantizedMatmulAttributes;
  let runner = "runQuantizedMatmul";
  let summary = "A matmul whose rhs is a quantized weight, formed a panel at a time";
  let description = [{
    `twill.matmul %lhs, W` (with its `transpose_rhs`, `alpha` and
    `addend`) where `W` is what `twill.dequantize_nf4` (four parts, its
    attributes) or `twill.dequantize_fp8` (two parts) forms of `parts`:
    `twill-fuse-dequantize` puts the two together after partitioning, so
    that the full-precision weight is never a value of the program. A
    backend forms a panel of the weight's rows at a time, rounded to the
    lhs's dtype as the dequantize would, and multiplies by it; only
    products whose lhs is not transposed (the forward's `x W^T`, the
    backward's `dy W`) are fused. With `lhs_fp8_block_size` the product is
    an FP8 weight's `x W^T` whose lhs is a `twill.round_to_fp8` of that
    block size: each block of the sum is e4m3 values times the block's
    scale, and a backend may multiply the e4m3 codes (Hopper's FP8 GEMMs).

    ```mlir
    %y = twill.quantized_matmul %x, weight(%codes, %absmax, %nested, %offset)
        {block_size = 64 : i64, nested_block_size = 256 : i64, rows = 64 : i64,
         columns = 128 : i64, transpose_rhs}
        : (tensor<2x8x128xf32>, tensor<64x64xi8>, tensor<64x2xi8>, tensor<1xf32>, tensor<f32>)
          -> tensor<2x8x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$lhs,
                       Variadic<StaticShapeTensorOf<[I8, F32]>>:$parts,
                       Optional<Twill_FloatTensor>:$addend,
                       OptionalAttr<I64Attr>:$block_size,
                       OptionalAttr<I64Attr>:$nested_block_size,
                       OptionalAttr<I64Attr>:$rows,
                       OptionalAttr<I64Attr>:$columns,
                       OptionalAttr<StrAttr>:$shard_axis,
                       UnitAttr:$transpose_rhs,
                       DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                       OptionalAttr<I64Attr>:$lhs_fp8_block_size);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` `weight` `(` $parts `)` (`plus` $addend^)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Whether the weight is NF4 (four parts), else FP8 (two).
    bool isNf4() { return getParts().size() == 4; }
  }];
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
  let hasVerifier = 1;
}

def Twill_ScaleColumnsOp : Twill_ComputeOp<"scale_columns", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 50;
  let runner = "runColumns";
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
  let hasVerifier = 1;
}

def Twill_AddColumnsOp : Twill_ComputeOp<"add_columns", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 52;
  let runner = "runColumns";
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
  let hasVerifier = 1;
}

def Twill_CrossEntropyOp : Twill_ComputeOp<"cross_entropy", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 11;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runCrossEntropyFamily";
  let summary = "Summed token cross-entropy and the count of counted tokens";
  let description = [{
    For logits `[..., vocab]` and labels `[...]` (the target of each position),
    returns the sum over positions of `logsumexp(logits) - logits[label]` and
    the number of positions summed; positions whose label is `ignore_index`
    count for neither. Returning the sum and the count, not the mean, lets a
    step normalise by all the tokens of its accumulated micro-batches.

    ```mlir
    %loss, %count = twill.cross_entropy %logits, %labels {ignore_index = -100 : i64}
        : (tensor<2x8192x128256xf32>, tensor<2x8192xi32>) -> (tensor<f32>, tensor<i64>)
    ```

    After partitioning, `shard_axis` says the logits hold this rank's block
    of the vocab along that mesh axis and `vocab_size` is the whole vocab
    (columns past it are padding): the op reduces its maxima and sums over
    the axis itself, so the logits are never gathered (vocab-parallel loss).

    With `sequences` (each position's sequence within its row, as labels
    are laid out) and `sequence_count` N, the sums and counts are each
    row's per sequence, `[rows..., N]` (DPO's completions: a position of
    sequence n of row r adds to `[r, n]`; a position whose sequence is not
    in [0, N) counts for none). The negated sums are the sequences'
    log-probabilities.

    ```mlir
    %sums, %counts = twill.cross_entropy %logits, %labels sequences(%segments) {sequence_count = 2 : i64}
        : (tensor<4x256x512xf32>, tensor<4x256xi32>, tensor<4x256xi32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$logits, Twill_IntTensor:$labels,
                       Optional<Twill_IntTensor>:$sequences,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss,
                      StaticShapeTensorOf<[AnySignlessInteger]>:$count);
  let assemblyFormat = [{
    $logits `,` $labels (`sequences` `(` $sequences^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_DpoLossOp : Twill_ComputeOp<"dpo_loss", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 62;
  let executableAttributes = Twill_DpoLossAttributes;
  let runner = "runDpoLoss";
  let cudaRunsBf16 = 0;
  let summary = "DPO's loss summed over preference pairs, the pairs and the metrics";
  let description = [{
    For `[pairs, 2]` log-probabilities of a pair's chosen (0) and rejected
    (1) completion, each summed over its tokens, under the policy and under
    the reference model, and `tokens` (how many each sums), returns TRL's
    DPO loss (`loss_type` sigmoid, ipo, hinge or robust, with `beta` and
    sigmoid's and robust's `label_smoothing`; support/Dpo.h) summed over
    the pairs with a token in each completion, how many those are, and the
    sums of TRL's metrics over them (`metrics`, 6 values: the chosen and
    rejected rewards, the pairs whose chosen reward is the greater, the
    margins, and the policy's chosen and rejected log-probabilities). Sums,
    not means, as
    `cross_entropy`'s: a step normalises by every pair of its accumulated
    micro-batches. Only `policy` has a gradient.

    ```mlir
    %loss, %pairs, %metrics = twill.dpo_loss %policy, %reference, %tokens
        {loss_type = "sigmoid", beta = 1.0e-01 : f64}
        : (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xi64>) -> (tensor<f32>, tensor<i64>, tensor<6xf32>)
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$policy,
                       StaticShapeTensorOf<[F32]>:$reference,
                       StaticShapeTensorOf<[I64]>:$tokens,
                       StrAttr:$loss_type, F64Attr:$beta,
                       DefaultValuedAttr<F64Attr, "0.0">:$label_smoothing);
  let results = (outs 0DTensorOf<[F32]>:$loss, 0DTensorOf<[I64]>:$pairs,
                      StaticShapeTensorOf<[F32]>:$metrics);
  let assemblyFormat = [{
    $policy `,` $reference `,` $tokens attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_LinearCrossEntropyOp : Twill_ComputeOp<"linear_cross_entropy", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 40;
  let executableAttributes = Twill_CrossEntropyAttributes;
  let runner = "runLinearCrossEntropy";
  let summary = "cross_entropy of `input weight^T`, a tile of positions at a time";
  let description = [{
    The loss sum and count of `cross_entropy(matmul(input, weight^T),
    labels)` for `input [..., hidden]` and `weight [vocab, hidden]`, without
    ever holding the logits of every position: the op forms them for
    `tile_rows` positions at a time in `tile`, its workspace (a result so
    that the memory plan holds it; nothing reads it). Per position the
    arithmetic is the untiled program's, so the loss is too.

    ```mlir
    %loss, %count, %tile = twill.linear_cross_entropy %h, %w, %labels {ignore_index = -100 : i64}
        : (tensor<1x65536x4096xbf16>, tensor<128256x4096xbf16>, tensor<1x65536xi32>)
        -> (tensor<f32>, tensor<i64>, tensor<8192x128256xbf16>)
    ```

    `shard_axis` and `vocab_size` are as for cross_entropy: after
    partitioning the weight may hold this rank's block of the vocab. With
    `softcap` (Gemma 2's final logits) the loss is of `softcap *
    tanh(logits / softcap)`, each tile capped where it is formed. With
    `sequences` and `sequence_count` the sums are each row's per sequence,
    as cross_entropy's.
  }];
  let arguments = (ins Twill_FloatTensor:$input, Twill_FloatTensor:$weight,
                       Twill_IntTensor:$labels,
                       Optional<Twill_IntTensor>:$sequences,
                       DefaultValuedAttr<I64Attr, "::twill::kIgnoreLabel">:$ignore_index,
                       OptionalAttr<StrAttr>:$shard_axis,
                       OptionalAttr<I64Attr>:$vocab_size,
                       OptionalAttr<F64Attr>:$softcap,
                       OptionalAttr<I64Attr>:$sequence_count);
  let results = (outs StaticShapeTensorOf<[AnyFloat]>:$loss,
                      StaticShapeTensorOf<[AnySignlessInteger]>:$count,
                      Twill_FloatTensor:$tile);
  let assemblyFormat = [{
    $input `,` $weight `,` $labels (`sequences` `(` $sequences^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Twill_ReshapeOp : Twill_ComputeOp<"reshape", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 12;
  let runner = "runCopy";
  let summary = "Same elements, new shape";
  let description = [{
    Reinterprets the row-major elements of `input` in a shape with the same
    element count, e.g. splitting the hidden dim into heads:

    ```mlir
    %h = twill.reshape %q : tensor<2x8192x4096xbf16> -> tensor<2x8192x32x128xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Twill_TransposeOp : Twill_ComputeOp<"transpose", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 13;
  let executableAttributes = Twill_TransposeAttributes;
  let runner = "runTranspose";
  let summary = "Permutation of dims";
  let description = [{
    `result` dim `i` is `input` dim `permutation[i]`.

    ```mlir
    %t = twill.transpose %x, [1, 0] : tensor<4096x14336xbf16> -> tensor<14336x4096xbf16>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input,
                       DenseI64ArrayAttr:$permutation);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Twill_CastOp : Twill_ComputeOp<"cast", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 14;
  let shardingRule = "elementwiseRule";
  let runner = "runCast";
  let summary = "Element type conversion";
  let description = [{
    Converts every element to the result's element type (round to nearest
    even when narrowing floats; integers convert to their float value).

    ```mlir
    %l = twill.cast %logits : tensor<2x8192x128256xbf16> -> tensor<2x8192x128256xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$input);
  let results = (outs StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Twill_OffloadOp : Twill_ComputeOp<"offload", [Pure, AllTypesMatch<["input", "result"]>]> {
  let opcode = 42;
  let shardingRule = "elementwiseRule";
  let runner = "runCopy";
  let summary = "A copy of a value in host memory";
  let description = [{
    twill-offload moves a value the backward reads out of device memory
    between its last forward reader and its first backward reader:
    `offload` copies it into the host arena (pinned memory on a GPU),
    `reload` back into the device arena. Only reloads read an offload's
    result.

    ```mlir
    %host = twill.offload %h : tensor<1x65536x4096xbf16>
    %back = twill.reload %host : tensor<1x65536x4096xbf16>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Twill_ReloadOp : Twill_ComputeOp<"reload", [Pure, AllTypesMatch<["input", "result"]>]> {
  let opcode = 43;
  let shardingRule = "elementwiseRule";
  let runner = "runCopy";
  let summary = "An offloaded value back in device memory";
  let description = [{
    Copies the host-memory value an `offload` made back into the device
    arena, for the backward to read.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Twill_SplitOp : Twill_ComputeOp<"split", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 44;
  let executableAttributes = Twill_SplitAttributes;
  let runner = "runPieces";
  let summary = "Pieces of a value along one dim";
  let description = [{
    The results cover `dim` of the input; every other dim is the input's.
    With `blocks` = 1 (the default) they are consecutive. With `blocks` = k
    the dim is k blocks of ceil(size / k) positions (the last ones shorter,
    as a dim sharded k ways), each block is cut into consecutive chunks,
    chunk i ceil(size of piece i / k) long, and piece i is chunk i of every
    block, in block order (support/BlockedPieces.h). Sharded over an axis
    of k ranks, each rank then cuts its own block: the frontend tiles a
    sequence-parallel layer's projections and MLP (and the positions' ids
    and labels of a tiled embedding and loss) that way, so that one tile
    is gathered, and its activations live, at a time.

    ```mlir
    %a, %b = twill.split %x {dim = 1 : i64}
        : tensor<1x8192x4096xbf16> -> tensor<1x4096x4096xbf16>, tensor<1x4096x4096xbf16>
    // Two blocks of 5, each cut 3 + 2: a = x[0:3] ++ x[5:8], b = x[3:5] ++ x[8:10]
    %c, %d = twill.split %y {dim = 0 : i64, blocks = 2 : i64}
        : tensor<10x64xf32> -> tensor<6x64xf32>, tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Twill_Tensor:$input, I64Attr:$dim,
                       DefaultValuedAttr<I64Attr, "1">:$blocks);
  let results = (outs Variadic<Twill_Tensor>:$pieces);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($pieces)";
  let hasVerifier = 1;
}

def Twill_ConcatOp : Twill_ComputeOp<"concat", [Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 45;
  let executableAttributes = Twill_SplitAttributes;
  let runner = "runPieces";
  let summary = "Pieces put together along one dim";
  let description = [{
    The inverse of split with the same `dim` and `blocks`: each piece's
    positions where split would have taken them from.

    ```mlir
    %y = twill.concat %a, %b {dim = 1 : i64}
        : tensor<1x4096x4096xbf16>, tensor<1x4096x4096xbf16> -> tensor<1x8192x4096xbf16>
    ```
  }];
  let arguments = (ins Variadic<Twill_Tensor>:$pieces, I64Attr:$dim,
                       DefaultValuedAttr<I64Attr, "1">:$blocks);
  let results = (outs Twill_Tensor:$result);
  let assemblyFormat = "$pieces attr-dict `:` type($pieces) `->` type($result)";
  let hasVerifier = 1;
}

include "dialects/twill/TwillGradOps.td"
include "dialects/twill/TwillOptimizerOps.td"
include "dialects/twill/TwillCollectiveOps.td"
include "dialects/twill/TwillAsyncOps.td"

#endif // TWILL_OPS_TD
