//===- BitsAndBytes.h - bitsandbytes' 4-bit weights -------------*- C++ -*-===//
//
// The 4-bit (NF4) weights of the checkpoints people download, as
// transformers saves a bitsandbytes Linear4bit: beside `W` (U8, two codes a
// byte, the first in the high nibble), `W.quant_map` (the 16 NF4 levels),
// `W.absmax` (one scale per block of `blocksize` values of W read
// row-major: F32, or with double quantization U8 codes of
// `W.nested_quant_map` times `W.nested_absmax`'s scale per block of
// `nested_blocksize`, plus `nested_offset`) and
// `W.quant_state.bitsandbytes__nf4` (U8: JSON of quant_type, blocksize,
// dtype, shape, nested_blocksize, nested_offset).
//
// Read as bitsandbytes' dequantize_4bit computes it: level times absmax in
// fp32, rounded to the state's dtype (the weight's before it was
// quantized), which is what QLoRA's matmuls compute with.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_IO_BITSANDBYTES_H
#define TWILL_RUNTIME_IO_BITSANDBYTES_H

#include "runtime/io/Safetensors.h"

namespace twill::io {

/// The suffix of the tensor that marks `name` as a 4-bit weight.
inline constexpr llvm::StringLiteral kNf4StateSuffix =
    ".quant_state.bitsandbytes__nf4";

/// Whether `name` is stored as bitsandbytes' 4-bit weight in `checkpoint`
/// (NF4, or FP4, which dequantize refuses).
bool isBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                        llvm::StringRef name);

/// The values of 4-bit weight `name`, which must have `shape`, in
/// row-major order; an inconsistent quant state is an error naming the
/// tensor and what is wrong.
llvm::Expected<std::vector<float>>
dequantizeBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                           llvm::StringRef name, llvm::ArrayRef<int64_t> shape);

} // namespace twill::io

#endif // TWILL_RUNTIME_IO_BITSANDBYTES_H
