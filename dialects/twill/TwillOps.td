//===- TwillOps.td - the mesh, and every op by family -----*- tablegen -*-===//
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
// What an all-gather moves: floats, or a quantized weight's bytes.
def Twill_GatheredTensor : StaticShapeTensorOf<[AnyFloat, I8]>;

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
// The ops, by family
//===----------------------------------------------------------------------===//

// Every dialects/twill/Twill*Ops.td but this one, in name order, included
// by a file the build writes (cmake/TwillTablegen.cmake): a new family is
// a new file. A family uses only what this file defines and the families
// before it in that order.
include "dialects/twill/TwillFamilies.td"

#endif // TWILL_OPS_TD
