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
// The same format, with double quantization, is how a quantized base
// (quantization.base NF4) is held: read from such a checkpoint as it is,
// or quantized on load as bitsandbytes quantizes on the cpu.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_IO_BITSANDBYTES_H
#define TWILL_RUNTIME_IO_BITSANDBYTES_H

#include "runtime/io/Safetensors.h"

namespace twill::io {

/// The suffixes of the tensor that marks `name` as a 4-bit weight: NF4,
/// or FP4 (which the readers refuse).
inline constexpr llvm::StringLiteral kNf4StateSuffix =
    ".quant_state.bitsandbytes__nf4";
inline constexpr llvm::StringLiteral kFp4StateSuffix =
    ".quant_state.bitsandbytes__fp4";

/// The 16 NF4 levels, and the 256 values of bitsandbytes' signed dynamic
/// map (its create_dynamic_map(signed=True)), which double quantization
/// codes the blocks' scales in.
llvm::ArrayRef<float> nf4Levels();
llvm::ArrayRef<float> dynamicMap();

/// A weight in NF4 with double quantization: `count` values in blocks of
/// `blockSize`, each value's 4-bit code of nf4Levels() (two a byte, the
/// first in the high nibble), each block's scale an 8-bit code of
/// dynamicMap() times its nested block's scale, plus `nestedOffset`.
struct Nf4Weight {
  int64_t blockSize = 64, nestedBlockSize = 256;
  std::vector<uint8_t> codes, absmax;
  std::vector<float> nestedAbsmax;
  float nestedOffset = 0;

  /// Block `block`'s scale, in fp32 as bitsandbytes dequantizes it.
  float scale(int64_t block) const;
};

/// `values` (row-major) quantized as bitsandbytes' quantize_4bit(nf4,
/// compress_statistics=True) does on the cpu: each block's absmax and its
/// values' nearest levels bit for bit, the absmaxes less their mean coded
/// in blocks of `nestedBlockSize` as its blockwise kernel codes them. The
/// mean is torch's fp32 mean, which bitsandbytes takes, summed in the order
/// torch sums on one thread (on several, over 32,768 blocks, torch's own
/// mean follows its thread count). The values must be finite.
Nf4Weight quantizeNf4(llvm::ArrayRef<float> values, int64_t blockSize,
                      int64_t nestedBlockSize);

/// quantizeNf4's steps, for a weight whose rows are whole blocks and whose
/// ranks each code their rows: each block's absmax (the largest magnitude
/// of its values); the NF4 codes of `values` given their blocks' absmax,
/// two a byte into `codes` (values.size() / 2 bytes, `values` starting at a
/// block); and the double quantization of every block's absmax into
/// `weight`'s absmax, nestedAbsmax and nestedOffset (its block sizes set).
std::vector<float> blockAbsmax(llvm::ArrayRef<float> values, int64_t blockSize);
void nf4Codes(llvm::ArrayRef<float> values, llvm::ArrayRef<float> absmax,
              int64_t blockSize, llvm::MutableArrayRef<uint8_t> codes);
void quantizeNf4Scales(llvm::ArrayRef<float> absmax, Nf4Weight &weight);

/// Value i of `weight`: its level times its block's scale, in fp32.
void dequantizeNf4(const Nf4Weight &weight,
                   llvm::MutableArrayRef<float> values);

/// Whether `name` is stored as bitsandbytes' 4-bit weight in `checkpoint`
/// (NF4, or FP4, which the readers refuse).
bool isBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                        llvm::StringRef name);

/// The weight whose bitsandbytes 4-bit part `name` is (W for W.absmax,
/// W.quant_map, W.nested_absmax, W.nested_quant_map and W's quant state),
/// or none.
std::optional<llvm::StringRef> fourBitWeightOf(llvm::StringRef name);

/// 4-bit weight `name`, which must have `shape`, as it is stored: NF4 with
/// double quantization, the standard level and dynamic maps; anything else
/// (or an inconsistent quant state) is an error naming the tensor.
llvm::Expected<Nf4Weight>
readBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                     llvm::StringRef name, llvm::ArrayRef<int64_t> shape);

/// The values of 4-bit weight `name` (NF4, with or without double
/// quantization), which must have `shape`, in row-major order, as
/// bitsandbytes' dequantize_4bit computes them: level times scale in fp32,
/// rounded to the state's dtype (the weight's before it was quantized),
/// which is what QLoRA's matmuls compute with.
llvm::Expected<std::vector<float>>
dequantizeBitsAndBytes4bit(const SafetensorsCheckpoint &checkpoint,
                           llvm::StringRef name, llvm::ArrayRef<int64_t> shape);

} // namespace twill::io

#endif // TWILL_RUNTIME_IO_BITSANDBYTES_H
