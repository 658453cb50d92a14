//===- Adapter.h - writing PEFT adapters ------------------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_ADAPTER_H
#define TWILL_RUNTIME_TRAIN_ADAPTER_H

#include "runtime/train/Program.h"

namespace twill {

/// Writes the LoRA weights of `program` to `directory` as a PEFT adapter:
/// adapter_model.safetensors (PEFT's key names) and adapter_config.json,
/// each through a temporary file renamed into place, so that PEFT and vLLM
/// load it and a crash never leaves a half-written adapter.
llvm::Error writePeftAdapter(Program &program, llvm::StringRef directory);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_ADAPTER_H
