//===- Passes.h - Twill's compiler passes -----------------------*- C++ -*-===//

#ifndef TWILL_PASSES_PASSES_H
#define TWILL_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "proto/executable.pb.h"

namespace mlir::twill {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// How far twillc compiles: the global program with its train step and
/// optimizer, with every value placed on the mesh, partitioned into one
/// rank's program, or with that program's memory planned (what is
/// emitted).
enum class Stage { Traced, Differentiated, Placed, Partitioned, Planned };

/// The passes between the traced model and emission, in order, set up for
/// the job's training settings.
void buildCompilePipeline(OpPassManager &pm, const ::twill::JobConfig &job,
                          Stage until = Stage::Planned);

/// The Executable for `module`; diagnostics on the offending op otherwise.
FailureOr<::twill::Executable> emitExecutable(ModuleOp module);

/// The Executable's opcode for a twill op (none for an op that is not
/// emitted: twill.mesh, twill.detach, other dialects').
std::optional<::twill::Opcode> opcodeOf(OperationName name);

/// `op` as the Executable describes it (its opcode and attributes, no
/// buffers): what twill-emit-executable writes for it, and what the cost
/// models (opmodel/) read. Fails, silently, for an op it has no opcode for,
/// and with an error if it writes other attributes than the opcode carries.
LogicalResult describeOp(Operation *op, ::twill::Instruction &out);

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::twill

#endif // TWILL_PASSES_PASSES_H
