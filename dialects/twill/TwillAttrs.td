//===- TwillAttrs.td - placements and tensor-parallel styles -*- tablegen -*-===//

#ifndef TWILL_ATTRS_TD
#define TWILL_ATTRS_TD

include "dialects/twill/TwillDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/TensorEncoding.td"

class Twill_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Twill_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Twill_PlacementAttr : Twill_Attr<"Placement", "placement",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let summary = "Where a tensor lives on a device mesh (DTensor placements)";
  let description = [{
    A tensor encoding with one entry per axis of the mesh `@mesh`:

    - `shard<d>`: the tensor's dim `d` is split in contiguous blocks over the
      axis (the last block may be shorter: no size has to divide evenly);
    - `replicate`: every device of the axis holds the whole tensor;
    - `partial<sum>`: every device of the axis holds a summand; the value is
      their sum.

    When two axes shard the same dim, the later mesh axis splits it first
    and the earlier one splits each of those blocks: `[shard<0>, shard<0>]`
    on (dp, tp) is tp's column block, stored split over dp, so that FSDP's
    gather over dp gives back exactly the tp block a rank computes with
    (DTensor's default order is the opposite and FSDP2 needs its
    `_StridedShard` for this case).

    Example, a weight FSDP-sharded on `dp` and column-parallel on `tp`:

    ```mlir
    tensor<4096x4096xbf16, #twill.placement<@mesh, [shard<0>, shard<0>]>>
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"::mlir::twill::AxisPlacement",
                      "one placement per mesh axis">:$axes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Twill_TensorParallelStyle : I32EnumAttr<"TensorParallelStyle",
    "how tensor parallelism splits a weight", [
      I32EnumAttrCase<"Column", 0, "column">,
      I32EnumAttrCase<"Row", 1, "row">,
      I32EnumAttrCase<"Vocab", 2, "vocab">,
      I32EnumAttrCase<"Replicate", 3, "replicate">]> {
  let cppNamespace = "::mlir::twill";
  let genSpecializedAttr = 0;
}

def Twill_TensorParallelAttr : Twill_Attr<"TensorParallel", "tp"> {
  let summary = "How tensor parallelism splits a parameter (Megatron's plan)";
  let description = [{
    What the model's author knows of a `[out, in]` weight, stated by the
    frontend on the parameter (`twill.tp`), so that the sharding passes need
    no model's names:

    - `column`: the output dim splits over tp (q, k, v, gate, up);
    - `row`: the input dim splits (o, down), and the product is a partial
      sum;
    - `vocab`: the rows of an embedding or output table split (vocab
      parallel);
    - `replicate`: every rank holds it whole (norms).

    `heads`, when not 0, is how many attention heads the dim splits into:
    where tp does not divide them, the weight stays whole. LoRA factors
    state their own: a column layer's A is `replicate` and its B `column`; a
    row layer's A is `row` and its B `replicate`; so the rank never splits.

    ```mlir
    %wq: tensor<4096x4096xf32> {twill.param = "...q_proj.weight", twill.tp = #twill.tp<column, heads = 32>}
    ```
  }];
  let parameters = (ins
    EnumParameter<Twill_TensorParallelStyle>:$style,
    DefaultValuedParameter<"int64_t", "0">:$heads
  );
  let assemblyFormat = "`<` $style (`,` `heads` `=` $heads^)? `>`";
  let genVerifyDecl = 1;
}

#endif // TWILL_ATTRS_TD
