//===- Fp8.h - weights in e4m3 with a scale per row -------------*- C++ -*-===//
//
// How a quantized base in FP8 (quantization.base FP8) is held: each value
// an e4m3 byte (support/Fp8.h), each row's scale the row's largest
// magnitude over 448 (at least 1e-12 / 448), as torch computes
// (w / scale).to(torch.float8_e4m3fn).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_IO_FP8_H
#define TWILL_RUNTIME_IO_FP8_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace twill::io {

struct Fp8Weight {
  std::vector<uint8_t> values; // [rows, columns]
  std::vector<float> scales;   // [rows]
};

/// The row-major [rows, columns] `values` in FP8. They must be finite.
Fp8Weight quantizeFp8(llvm::ArrayRef<float> values, int64_t rows,
                      int64_t columns);

/// Value (r, c): its e4m3 value times row r's scale, in fp32.
void dequantizeFp8(const Fp8Weight &weight, llvm::MutableArrayRef<float> out);

} // namespace twill::io

#endif // TWILL_RUNTIME_IO_FP8_H
