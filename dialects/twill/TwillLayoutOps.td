//===- TwillLayoutOps.td - layout and memory ops -----------*- tablegen -*-===//
//
// Reshape, transpose, cast, split and concat; offload and reload, a
// value to host memory and back.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_LAYOUT_OPS_TD
#define TWILL_LAYOUT_OPS_TD

def Twill_ReshapeOp : Twill_ComputeOp<"reshape", [Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 12;
  let runner = "runCopy";
  let shapeRule = "reshape";
  let sameElementType = ["input", "result"];
  let verifier = "verifyShapeRule";
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
}

def Twill_TransposeOp : Twill_ComputeOp<"transpose", [Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
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

def Twill_CastOp : Twill_ComputeOp<"cast", [Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
  let opcode = 14;
  let shardingRule = "elementwiseRule";
  let runner = "runCast";
  let shapeRule = "unary";
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

def Twill_SplitOp : Twill_ComputeOp<"split", [Twill_Multilinear, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
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

def Twill_ConcatOp : Twill_ComputeOp<"concat", [Twill_Additive, Pure, DeclareOpInterfaceMethods<Twill_VJPOpInterface>]> {
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

#endif // TWILL_LAYOUT_OPS_TD
