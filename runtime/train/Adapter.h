//===- Adapter.h - writing PEFT adapters ------------------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_ADAPTER_H
#define TWILL_RUNTIME_TRAIN_ADAPTER_H

#include "runtime/train/Program.h"

namespace twill {

/// Writes the LoRA weights of `program` to `directory` as a PEFT adapter:
/// adapter_model.safetensors (PEFT's key names) and adapter_config.json
/// naming `baseModel`, each through a temporary file renamed into place, so
/// that PEFT and vLLM load it and a crash never leaves a half-written
/// adapter.
llvm::Error writePeftAdapter(Program &program, llvm::StringRef directory,
                             llvm::StringRef baseModel);

/// Writes every weight but the LoRA ones to `directory` as a Hugging Face
/// model folder (safetensors, sharded by checkpoint.max_shard_bytes, and a
/// config.json of the job's model) that transformers loads: the result of
/// full fine-tuning, the random base a checkpoint.random_base job's adapter
/// belongs to, or with `mergeAdapter` the base with the LoRA folded in.
llvm::Error writeHfModel(Program &program, llvm::StringRef directory,
                         bool mergeAdapter);

/// Saves what training produced into `directory`: the adapter (LoRA) or
/// the model (full fine-tuning). `finalDirectory`, when the folder is
/// renamed once complete (a checkpoint's step_N.partial), is where it will
/// be: the adapter names its random base there.
llvm::Error saveTrainingResult(Program &program, llvm::StringRef directory,
                               llvm::StringRef finalDirectory = "");

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_ADAPTER_H
