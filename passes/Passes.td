//===- Passes.td - Twill's compiler passes -----------------*- tablegen -*-===//

#ifndef TWILL_PASSES_TD
#define TWILL_PASSES_TD

include "mlir/Pass/PassBase.td"

def EmitExecutable : Pass<"twill-emit-executable", "mlir::ModuleOp"> {
  let summary = "Writes the program as an Executable for twill-train";
  let description = [{
    Turns every function of the module into an entry point of an Executable
    (proto/executable.proto): one buffer per tensor value, one instruction
    per op (its name, operand and result buffers, attributes), the parameter
    table (Hugging Face name, trainable) and the inputs. It is generic: any
    op without regions and with builtin attributes is emitted as it is, so
    later passes add ops, not cases here. The IR itself is left unchanged.

    Example: `twill-opt --twill-emit-executable=output=job.txtpb in.mlir`.
  }];
  let options = [
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "Where to write the Executable as textproto ('-': stderr)">
  ];
}

#endif // TWILL_PASSES_TD
