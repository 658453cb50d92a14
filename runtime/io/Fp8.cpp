//===- Fp8.cpp - weights in e4m3 with a scale per row ---------------------===//

#include "runtime/io/Fp8.h"

#include "support/Fp8.h"

#include <algorithm>
#include <cmath>

using namespace twill;
using namespace twill::io;

Fp8Weight io::quantizeFp8(llvm::ArrayRef<float> values, int64_t rows,
                          int64_t columns) {
  Fp8Weight weight;
  weight.values.resize(values.size());
  weight.scales.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    llvm::ArrayRef<float> row = values.slice(r * columns, columns);
    float most = 0;
    for (float value : row)
      most = std::max(most, std::fabs(value));
    // Each an fp32 operation, as torch's amax.clamp(min=1e-12) / 448 and
    // w / scale.
    float scale = std::max(most, 1e-12f) / fp8::kMax;
    weight.scales[r] = scale;
    for (int64_t c = 0; c < columns; ++c)
      weight.values[r * columns + c] = fp8::fromFloat(row[c] / scale);
  }
  return weight;
}

void io::dequantizeFp8(const Fp8Weight &weight,
                       llvm::MutableArrayRef<float> out) {
  static const fp8::Table table = fp8::table();
  int64_t rows = weight.scales.size(),
          columns = rows ? int64_t(out.size()) / rows : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < columns; ++c)
      out[r * columns + c] =
          table.values[weight.values[r * columns + c]] * weight.scales[r];
}
