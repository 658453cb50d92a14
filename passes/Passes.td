//===- Passes.td - Twill's compiler passes -----------------*- tablegen -*-===//

#ifndef TWILL_PASSES_TD
#define TWILL_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"twill-autodiff", "mlir::ModuleOp"> {
  let summary = "Adds @train_step: the loss and its gradients";
  let description = [{
    Clones `@forward` into `@train_step` and appends its reverse pass: from
    the loss sum (cotangent 1) back to every trainable parameter, through
    each op's VJPOpInterface rule. Only values that depend on a trainable
    parameter get cotangents, so frozen base weights cost no weight-gradient
    matmul: LoRA's backward is cheap by construction. Full fine-tuning is the
    same pass with every parameter trainable.

    `@train_step` returns the loss sum, the token count and one gradient per
    trainable parameter, in argument order, each named by a
    `twill.output = "<parameter>.grad"` result attribute.
  }];
}

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
