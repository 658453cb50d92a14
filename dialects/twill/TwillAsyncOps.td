//===- TwillAsyncOps.td - collectives in flight ------------*- tablegen -*-===//
//
// A collective (or a copy to or from host memory) split in two: a start op
// that begins it and returns a handle, and the one wait that ends it and
// yields its tensor. Between the two, compute runs while the collective is
// in flight. The verifier proves each schedule safe: every handle is waited
// exactly once, in the block that starts it (so on every path), and once
// memory is planned (the module has twill.arena_bytes), nothing between a
// start and its wait is written over the collective's input or result
// (verifyFlightsInPlannedMemory).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_ASYNC_OPS_TD
#define TWILL_ASYNC_OPS_TD

include "mlir/IR/AttrTypeBase.td"

def Twill_PendingType : TypeDef<Twill_Dialect, "Pending"> {
  let mnemonic = "pending";
  let summary = "A collective in flight: the tensor its wait will yield";
  let parameters = (ins "::mlir::RankedTensorType":$value);
  let assemblyFormat = "`<` $value `>`";
}

// The start of a collective: its operands and attributes are the blocking
// collective's, its result a handle to the tensor that one returns. Not
// Pure: two identical starts are two transfers, and an unused one is an
// error (it is never waited), not dead code.
class Twill_StartOp<string blocking, dag collectiveArguments>
    : Twill_Op<blocking # "_start"> {
  let starts = blocking;
  // Run as the collective they start: the cpu's run loop does (by its
  // communicator), cuda's runner puts them on its communication stream.
  let cpuRunner = "";
  let cudaRunner = "runCollective";
  let summary = "Begins " # blocking # "; twill.wait ends it";
  let arguments = collectiveArguments;
  let results = (outs Twill_PendingType:$handle);
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult
    $cppClass::verifySymbolUses(::mlir::SymbolTableCollection &symbolTable) {
      return ::mlir::twill::verifyCollective(getOperation(), symbolTable);
    }
  }];
}

def Twill_AllGatherStartOp : Twill_StartOp<"all_gather",
    (ins Twill_GatheredTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis,
         I64Attr:$dim)> {
  let opcode = 35;
  let verifier = "verifyStartOperands";
  let executableAttributes = Twill_GatherAttributes;
  let description = [{
    ```mlir
    %h = twill.all_gather_start %w over @mesh["dp"] dim 0 : tensor<64x64xf32> -> !twill.pending<tensor<128x64xf32>>
    %full = twill.wait %h : !twill.pending<tensor<128x64xf32>>
    ```
  }];
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` $dim attr-dict `:` type($input)
    `->` type($handle)
  }];
}

def Twill_ReduceScatterStartOp : Twill_StartOp<"reduce_scatter",
    (ins Twill_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis,
         I64Attr:$dim)> {
  let opcode = 36;
  let verifier = "verifyStartOperands";
  let executableAttributes = Twill_GatherAttributes;
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `dim` $dim attr-dict `:` type($input)
    `->` type($handle)
  }];
}

def Twill_AllReduceStartOp : Twill_StartOp<"all_reduce",
    (ins StaticShapeTensorOf<[AnyFloat, AnySignlessInteger]>:$input,
         FlatSymbolRefAttr:$mesh, StrAttr:$axis)> {
  let opcode = 37;
  let executableAttributes = Twill_AllReduceAttributes;
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` attr-dict `:` type($input) `->`
    type($handle)
  }];
}

def Twill_AllToAllStartOp : Twill_StartOp<"all_to_all",
    (ins Twill_FloatTensor:$input, FlatSymbolRefAttr:$mesh, StrAttr:$axis,
         I64Attr:$split_dim, I64Attr:$concat_dim)> {
  let opcode = 38;
  let verifier = "verifyStartOperands";
  let executableAttributes = Twill_AllToAllAttributes;
  let assemblyFormat = [{
    $input `over` $mesh `[` $axis `]` `split` $split_dim `concat` $concat_dim
    attr-dict `:` type($input) `->` type($handle)
  }];
}

// twill.offload and twill.reload split the same way: the copy to or from
// host memory runs while compute goes on (on a GPU, on a stream of its own).
class Twill_TransferStartOp<string transfer> : Twill_Op<transfer # "_start"> {
  let starts = transfer;
  let summary = "Begins twill." # transfer # "'s copy; twill.wait ends it";
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs Twill_PendingType:$handle);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($handle)";
  let hasVerifier = 1;
}

def Twill_OffloadStartOp : Twill_TransferStartOp<"offload"> {
  let opcode = 46;
  let runner = "runCopy";
  let description = [{
    Its wait yields the value in host memory, which only a reload reads.

    ```mlir
    %h = twill.offload_start %x : tensor<1x8192x4096xbf16> -> !twill.pending<tensor<1x8192x4096xbf16>>
    %host = twill.wait %h : !twill.pending<tensor<1x8192x4096xbf16>>
    %r = twill.reload_start %host : tensor<1x8192x4096xbf16> -> !twill.pending<tensor<1x8192x4096xbf16>>
    %back = twill.wait %r : !twill.pending<tensor<1x8192x4096xbf16>>
    ```
  }];
}

def Twill_ReloadStartOp : Twill_TransferStartOp<"reload"> {
  let opcode = 47;
  let runner = "runCopy";
}

def Twill_WaitOp : Twill_Op<"wait", [TypesMatchWith<
    "result is the tensor the handle is pending", "handle", "result",
    "::llvm::cast<::mlir::twill::PendingType>($_self).getValue()">]> {
  let opcode = 39;
  let writesResults = 0;
  let cpuRunner = "";
  let cudaRunner = "runWait";
  let summary = "Ends a collective or copy in flight and yields its tensor";
  let arguments = (ins Twill_PendingType:$handle);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$handle attr-dict `:` type($handle)";
}

#endif // TWILL_ASYNC_OPS_TD
