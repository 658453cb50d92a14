//===- DecoderBuilder.h - trace a decoder + LoRA into twill IR --*- C++ -*-===//
//
// Traces the forward pass of a decoder-only model of a family the frontend
// knows (frontend/config/ModelFamily.h: Llama 3.x, Mistral, Qwen2, Qwen3,
// Gemma 2 and Gemma 3's text model) with LoRA adapters, as the family's
// transformers causal LM + PEFT compute it, into
//
//   func.func @forward(%params..., %tokens, %labels, %positions, %segments)
//       -> (tensor<f32> {twill.output = "loss_sum", twill.role = ...},
//           tensor<i64> {twill.output = "token_count", twill.role = ...})
//
// at global shapes [train.batch_size, train.seq_len]. Parameters are
// arguments named with their Hugging Face names (`twill.param`), each
// stating how it starts (`twill.init`) and, an adapter's, what it adapts
// (`twill.adapter`); the trainable ones carry `twill.trainable`; inputs
// carry `twill.input` and outputs `twill.output`, each with its role
// (`twill.role`), which the runtime finds them by. Labels are per position (the
// token that should follow it, -100 to ignore): the data pipeline shifts, the
// model does not. Positions restart and segments change at each document of
// a packed row, so attention never crosses a document boundary.
//
// Under DPO @forward returns the loss of preference pairs and TRL's metric
// sums too; with a precomputed reference (dpo.reference PRECOMPUTED) it
// reads the reference's log-probabilities as an input, and a second entry
// point, @reference, computes them for a batch with every adapter off.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_DECODERBUILDER_H
#define TWILL_FRONTEND_DECODERBUILDER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "proto/job_config.pb.h"

#include <string>

namespace twill {

/// Hooks for tests that check that nothing after the frontend reads
/// meaning into a parameter's name or assumes how it starts.
struct TraceOptions {
  /// Put before every parameter's name (and every name that refers to a
  /// parameter): the program must train as without it.
  std::string parameterPrefix;
  /// Parameters that start at 1 (the norms' weights) start at 0 instead,
  /// as a family whose norm scales by (1 + w) starts them.
  bool zeroOnes = false;
};

/// Builds the module for `job` (a resolved, validated config): its mesh and
/// its @forward function (and DPO's @reference, where it is precomputed).
mlir::OwningOpRef<mlir::ModuleOp>
buildDecoderModule(mlir::MLIRContext &context, const JobConfig &job,
                   const TraceOptions &options = {});

} // namespace twill

#endif // TWILL_FRONTEND_DECODERBUILDER_H
