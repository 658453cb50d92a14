//===- TwillAttrs.td - the placement attribute -------------*- tablegen -*-===//

#ifndef TWILL_ATTRS_TD
#define TWILL_ATTRS_TD

include "dialects/twill/TwillDialect.td"
include "mlir/IR/AttrTypeBase.td"
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

#endif // TWILL_ATTRS_TD
