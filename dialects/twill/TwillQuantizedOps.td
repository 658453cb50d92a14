//===- TwillQuantizedOps.td - a quantized base's ops -------*- tablegen -*-===//
//
// NF4 and FP8 weights dequantized, an FP8 product's input rounded, and
// the matmul that dequantizes its weight a panel at a time.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_QUANTIZED_OPS_TD
#define TWILL_QUANTIZED_OPS_TD

def Twill_DequantizeNf4Op : Twill_ComputeOp<"dequantize_nf4", [Twill_Dequantize, Pure]> {
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

def Twill_DequantizeFp8Op : Twill_ComputeOp<"dequantize_fp8", [Twill_Dequantize, Pure]> {
  let opcode = 59;
  let runner = "runDequantizeFp8";
  let shapeRule = "dequantizeFp8";
  let verifier = "verifyShapeRule";
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

#endif // TWILL_QUANTIZED_OPS_TD
