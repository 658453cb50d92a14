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

/// Writes the gradient the program's gradient sums hold of each trainable
/// tensor to `path` (safetensors), named "<tensor>.grad" by the
/// checkpoint's (or adapter's) tensor: whole, a fused projection's blocks
/// of rows put together as its adapter writes them. A collective: every
/// rank calls it, rank 0 writes.
llvm::Error writeGradients(Program &program, llvm::StringRef path);

/// Which weights writeHfModel writes: as trained (a quantized base's
/// dequantized), with the LoRA folded in, or as the program holds them (a
/// quantized base NF4 in bitsandbytes' 4-bit format, with its
/// quantization_config).
enum class HfWeights { Trained, Merged, Held };

/// Writes every weight but the LoRA ones to `directory` as a Hugging Face
/// model folder (safetensors, sharded by checkpoint.max_shard_bytes, and a
/// config.json of the job's model) that transformers loads: the result of
/// full fine-tuning, the random base a checkpoint.random_base job's adapter
/// belongs to, the base with the LoRA folded in (Merged), or the base as
/// the program holds it (Held).
llvm::Error writeHfModel(Program &program, llvm::StringRef directory,
                         HfWeights weights);

/// Fails, saying why, unless `directory` (given as `flag`) may take a new
/// model folder: not the folder of the base checkpoint `baseDir` (a folder,
/// or one .safetensors file) the program reads, nor a folder inside it, by
/// any path (written there, a base replaced the weights it was read from);
/// nor a folder that holds a model already (config.json, safetensors
/// files, an index), which may be another one's, and which no writer may
/// remove.
llvm::Error checkNewModelFolder(llvm::StringRef flag, llvm::StringRef directory,
                                llvm::StringRef baseDir);

/// Saves what training produced into `directory`: the adapter (LoRA) or
/// the model (full fine-tuning). `finalDirectory`, when the folder is
/// renamed once complete (a checkpoint's step_N.partial), is where it will
/// be: the adapter names its random base there.
llvm::Error saveTrainingResult(Program &program, llvm::StringRef directory,
                               llvm::StringRef finalDirectory = "");

} // namespace twill

#endif // TWILL_RUNTIME_TRAIN_ADAPTER_H
