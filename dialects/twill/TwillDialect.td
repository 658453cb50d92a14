//===- TwillDialect.td - the twill dialect -----------------*- tablegen -*-===//
//
// Twill's IR: a Llama + LoRA training step at the level the model is written
// in, with DTensor-style placements on a dp x tp device mesh in the types.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_DIALECT_TD
#define TWILL_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "dialects/twill/TwillExecutable.td"

def Twill_Dialect : Dialect {
  let name = "twill";
  let cppNamespace = "::mlir::twill";
  let summary = "Sharded Llama + LoRA training programs";
  let description = [{
    The `twill` dialect describes one training step of a Llama model with LoRA
    adapters as a single SPMD program over a named device mesh. Ops are coarse
    (embedding, matmul, rms_norm, rope, attention, ...), and a value's placement
    on the mesh is part of its tensor type:

    ```mlir
    twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}
    ... tensor<128256x4096xbf16, #twill.placement<@mesh, [shard<0>, shard<1>]>>
    ```

    Before partitioning, shapes are global; after it, they are local shards.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // twill.tp, twill.init, twill.adapter and twill.stored on parameters,
  // twill.layer on ops and parameters.
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Defined beside the attribute storage classes (TwillAttrs.cpp).
    void registerAttributes();
    /// Defined beside the async collectives (TwillAsyncOps.cpp).
    void registerTypes();
  }];
}

// A gradient rule's part: the cotangent of `operand` is the one result of
// the op `gradOp` defines (a def's name: gradient ops are defined after the
// ops they differentiate), whose operands and attributes are those of the
// same name of the op differentiated, `grad` the cotangent of its first
// result.
class Twill_GradientOf<string operandName, string gradOp> {
  string operand = operandName;
  string op = gradOp;
}

class Twill_Op<string mnemonic, list<Trait> traits = []>
    : Op<Twill_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  // What the Executable and the runtime know of the op, from which
  // twill-tblgen (tblgen/) generates executable.proto's Opcode enum and the
  // runtime's tables; an op that leaves one unset does not build.
  //
  // Its Opcode's number (the enum value is named as the op), which never
  // changes once given; 0: no program carries it (a pass removes it).
  int opcode = ?;
  // The attributes its instructions carry (TwillExecutable.td).
  Twill_Attributes executableAttributes = Twill_NoAttributes;
  // The function that runs it in each backend (twill::cpu, twill::cuda);
  // `runner` names both where they share a name. "" on the cpu: its run
  // loop runs it, by its communicator. cuda's reads and writes bf16 values
  // as stored where cudaRunsBf16, fp32 copies of them where not.
  string runner = ?;
  string cpuRunner = runner;
  string cudaRunner = runner;
  bit cudaRunsBf16 = 1;
  // A start op's blocking op, whose work it begins and a twill.wait ends.
  string starts = "";
  // A collective: the twill::shapes::Collective it is (opmodel/Shapes.h),
  // which says how its result's shape follows from its input's; a start op
  // is its blocking op's. And whether it moves values between ranks
  // (local_slice only slices).
  string collective = "";
  bit betweenRanks = 0;
  // Whether its instruction writes its results' buffers (a wait's result
  // is the buffer its start fills: the emitter gives the wait none).
  bit writesResults = 1;

  // Its shape rule: the function of twill::shapes (opmodel/Shapes.h) that
  // checks its operands' and results' shapes, given one Shape each in ODS
  // order (std::optional<Shape> where optional). twill-tblgen declares it,
  // runs it on the runtime's instructions (checkShapeRule) and in the
  // dialect's verifyShapeRule(op), which first checks that the values
  // named in `sameElementType` share one element type.
  string shapeRule = "";
  list<string> sameElementType = [];

  // Its gradient, where each differentiable operand's is one op
  // (Twill_GradientOf): twill-tblgen writes its buildVJP from these.
  list<Twill_GradientOf> gradients = [];

  // The dialect's helper that verifies it, and the one that gives its
  // sharding rule, where one does it all: a function of the op
  // (ShapeChecks.h, ShardingRule.h, or verifyShapeRule) that the generated
  // verify() and getShardingRule() call ("": the op's own code).
  string verifier = "";
  string shardingRule = "";
  let hasVerifier = !ne(verifier, "");

  // Every op checks that the placements in its operand and result types name
  // an existing mesh with as many axes as they have entries.
  let extraClassDefinition = [{
    ::llvm::LogicalResult
    $cppClass::verifySymbolUses(::mlir::SymbolTableCollection &symbolTable) {
      return ::mlir::twill::verifyPlacementSymbols(getOperation(), symbolTable);
    }
  }];
}

#endif // TWILL_DIALECT_TD
