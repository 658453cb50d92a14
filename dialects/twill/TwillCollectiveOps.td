//===- TwillCollectiveOps.td - collectives on a mesh axis --*- tablegen -*-===//
//
// After twill-partition, every change of placement is one of these ops on a
// named axis of a mesh; types are then local shards. The result shapes are
// checked against the axis size.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_COLLECTIVE_OPS_TD
#define TWILL_COLLECTIVE_OPS_TD

class Twill_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Twill_Op<mnemonic, !listconcat(traits, [Pure])> {
  // The cpu's run loop runs them by its communicator; cuda's runner, by
  // NCCL on its communication stream.
  let cpuRunner = "";
  let cudaRunner = "runCollective";
  let extraClassDefinition = [{
    ::llvm::LogicalResult
    $cppClass::verifySymbolUses(::mlir::SymbolTableCollection &symbolTable) {
      return ::mlir::twill::verifyCollective(getOperation(), symbolTable);
    }
  }];
}

def Twill_AllGatherOp : Twill_CollectiveOp<"all_gather", [Twill_Costly]> {
  let opcode = 30;
  let collective = "AllGather";
  let verifier = "verifyBlocking";
  let betweenRanks = 1;
  let executableAttributes = Twill_GatherAttributes;
  let summary = "Concatenate the shards of an axis (shard<dim> -> replicate)";
  let description = [{
    Every rank of the axis gets the inputs of all of them concatenated along
    `dim`, in axis order, cut to the result's size: blocks are
    `ceil(size / ranks)` long and the last one's padding is dropped, so no
    size has to divide by the axis. It moves floats, or a quantized
    weight's bytes (i8), as they are.

    ```mlir
    %full = twill.all_gather %x over @mesh["tp"] dim 1 : tensor<2x64x64xf32> -> tensor<2x256x64xf32>
    ```
  }];
  let arguments = (ins Twill_GatheredTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs Twill_GatheredTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` $dim attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Twill_ReduceScatterOp : Twill_CollectiveOp<"reduce_scatter", [Twill_Costly]> {
  let opcode = 31;
  let collective = "ReduceScatter";
  let verifier = "verifyBlocking";
  let betweenRanks = 1;
  let executableAttributes = Twill_GatherAttributes;
  let summary = "Sum over an axis, keep one block (partial -> shard<dim>)";
  let description = [{
    Sums the inputs of the axis's ranks and leaves each rank its block along
    `dim`, in axis order; blocks are `ceil(size / ranks)` long, the last one
    zero-padded.

    ```mlir
    %h = twill.reduce_scatter %partial over @mesh["tp"] dim 1 : tensor<2x256x64xf32> -> tensor<2x64x64xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$dim);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` $dim attr-dict `:` type($input)
    `->` type($result)
  }];
}

def Twill_AllReduceOp : Twill_CollectiveOp<"all_reduce",
    [Twill_Costly, AllTypesMatch<["input", "result"]>]> {
  let opcode = 32;
  let collective = "AllReduce";
  let betweenRanks = 1;
  let executableAttributes = Twill_AllReduceAttributes;
  let summary = "Sum over an axis (partial -> replicate)";
  let description = [{
    ```mlir
    %g = twill.all_reduce %partial over @mesh["dp"] : tensor<8x64xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$input,
                       FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` attr-dict `:` type($result)
  }];
}

def Twill_AllToAllOp : Twill_CollectiveOp<"all_to_all", [Twill_Costly]> {
  let opcode = 33;
  let collective = "AllToAll";
  let verifier = "verifyBlocking";
  let betweenRanks = 1;
  let executableAttributes = Twill_AllToAllAttributes;
  let summary = "Move a shard from one dim to another (shard<i> -> shard<j>)";
  let description = [{
    Splits `split_dim` into one block per rank of the axis, sends block r to
    rank r, and concatenates what arrives along `concat_dim`.

    ```mlir
    %y = twill.all_to_all %x over @mesh["tp"] split 2 concat 1
        : tensor<2x64x32x128xf32> -> tensor<2x256x8x128xf32>
    ```
  }];
  let arguments = (ins Twill_FloatTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$split_dim, I64Attr:$concat_dim);
  let results = (outs Twill_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `split` $split_dim `concat` $concat_dim
    attr-dict `:` type($input) `->` type($result)
  }];
}

def Twill_LocalSliceOp : Twill_CollectiveOp<"local_slice"> {
  let opcode = 34;
  let collective = "LocalSlice";
  let verifier = "verifyBlocking";
  let executableAttributes = Twill_GatherAttributes;
  let cpuRunner = "runLocalSlice"; // it only slices
  let summary = "Keep this rank's block of a whole tensor (replicate -> shard<dim>)";
  let description = [{
    No communication: every rank of the axis holds the whole input and keeps
    its block along `dim`, zero-padded when the last block is short.
    ```mlir
    %x = twill.local_slice %full over @mesh["tp"] dim 0 : tensor<512x64xf32> -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$input,
                       FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$dim);
  let results = (outs StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$result);
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` $dim attr-dict `:` type($input)
    `->` type($result)
  }];
}

#endif // TWILL_COLLECTIVE_OPS_TD
