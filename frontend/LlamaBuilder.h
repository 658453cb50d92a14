//===- LlamaBuilder.h - trace Llama + LoRA into twill IR --------*- C++ -*-===//
//
// Traces the forward pass of a Llama 3.x model with LoRA adapters, as
// Hugging Face's LlamaForCausalLM + PEFT compute it, into
//
//   func.func @forward(%params..., %tokens, %labels, %positions, %segments)
//       -> (tensor<f32> {twill.output = "loss_sum"},
//           tensor<i64> {twill.output = "token_count"})
//
// at global shapes [train.batch_size, train.seq_len]. Parameters are
// arguments named with their Hugging Face names (`twill.param`); the
// trainable ones carry `twill.trainable`; inputs carry `twill.input`. Labels are per position (the
// token that should follow it, -100 to ignore): the data pipeline shifts, the
// model does not. Positions restart and segments change at each document of
// a packed row, so attention never crosses a document boundary.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_LLAMABUILDER_H
#define TWILL_FRONTEND_LLAMABUILDER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "proto/job_config.pb.h"

namespace twill {

/// Builds the module for `job` (a resolved, validated config): its mesh and
/// its @forward function.
mlir::OwningOpRef<mlir::ModuleOp> buildLlamaModule(mlir::MLIRContext &context,
                                                   const JobConfig &job);

} // namespace twill

#endif // TWILL_FRONTEND_LLAMABUILDER_H
