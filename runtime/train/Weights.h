//===- Weights.h - filling parameters from checkpoints ----------*- C++ -*-===//

#ifndef TWILL_RUNTIME_TRAIN_WEIGHTS_H
#define TWILL_RUNTIME_TRAIN_WEIGHTS_H

#include "runtime/train/Program.h"

namespace twill {

/// Fills every parameter of `program`. Base weights come from the Hugging
/// Face checkpoint at `baseDir` (a folder or one .safetensors file) or,
/// with the job's checkpoint.random_base, from a seeded normal(0, 0.02)
/// (norms 1). LoRA weights come from the PEFT adapter folder `adapterDir`
/// (adapter_model.safetensors + adapter_config.json, whose rank and alpha
/// must be the job's) or start as PEFT starts them: A uniform in
/// +-1/sqrt(fan_in), B zero, so training starts from the base model.
/// Each rank reads only its blocks of the tensors; returns the bytes of
/// tensor data it read.
llvm::Expected<uint64_t> loadParameters(Program &program, llvm::StringRef baseDir,
                           llvm::StringRef adapterDir);

/// PEFT's name for the parameter `name` inside adapter_model.safetensors.
std::string peftAdapterKey(llvm::StringRef name);

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_WEIGHTS_H
