//===- Weights.h - filling parameters from checkpoints ----------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_WEIGHTS_H
#define TWILL_RUNTIME_TRAIN_WEIGHTS_H

#include "runtime/executable/Executable.h"

namespace twill {

/// Fills every parameter buffer: base weights from the Hugging Face
/// checkpoint at `baseDir` (a folder or one .safetensors file), LoRA
/// weights from the PEFT adapter folder `adapterDir` (adapter_model
/// .safetensors + adapter_config.json, whose rank and alpha must be the
/// job's). Without an adapter, LoRA weights start at zero, so the model is
/// the base model.
llvm::Error loadParameters(const Executable &executable, BufferSet &buffers,
                           llvm::StringRef baseDir, llvm::StringRef adapterDir);

/// PEFT's name for the parameter `name` inside adapter_model.safetensors.
std::string peftAdapterKey(llvm::StringRef name);

/// Whether `name` is a LoRA adapter weight (…lora_A.weight, …lora_B.weight).
bool isLoraWeight(llvm::StringRef name);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_WEIGHTS_H
