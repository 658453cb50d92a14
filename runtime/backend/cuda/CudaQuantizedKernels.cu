//===- CudaQuantizedKernels.cu - quantized weights dequantized ------------===//
//
// A frozen weight stored in NF4 (support/Nf4.h) or FP8 (support/Fp8.h)
// formed in the compute dtype right before the products that read it, as
// the cpu backend forms it: the same fp32 arithmetic, value for value.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

/// One thread per byte of codes: its two values, with their block's scale.
/// Rows past the whole weight's (a rank's padding) are zero.
template <typename T>
__global__ void dequantizeNf4Kernel(const uint8_t *codes, const uint8_t *absmax,
                                    const float *nested, const float *offset,
                                    nf4::Geometry g, nf4::Tables tables,
                                    T *out) {
  int64_t bytesPerRow = g.columns / 2;
  GRID_STRIDE(i, g.rows * bytesPerRow) {
    int64_t r = i / bytesPerRow, c = (i % bytesPerRow) * 2;
    float first = 0, second = 0;
    if (g.firstRow + r < g.wholeRows) {
      float scale = nf4::rowBlockScale(tables, absmax, nested, *offset, g, r,
                                       c / g.blockSize);
      uint8_t pair = codes[i];
      first = tables.levels[pair >> 4] * scale;
      second = tables.levels[pair & 0xf] * scale;
    }
    out[r * g.columns + c] = storeAs<T>(first);
    out[r * g.columns + c + 1] = storeAs<T>(second);
  }
}

template <typename T>
__global__ void dequantizeFp8Kernel(const uint8_t *values, const float *scales,
                                    int64_t rows, int64_t columns,
                                    fp8::Table table, T *out) {
  GRID_STRIDE(i, rows * columns)
  out[i] = storeAs<T>(table.values[values[i]] * scales[i / columns]);
}

} // namespace

void dequantizeFp8(const uint8_t *values, const float *scales, int64_t rows,
                   int64_t columns, void *out, bool bf16, cudaStream_t stream) {
  static const fp8::Table table = fp8::table();
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    dequantizeFp8Kernel<<<blocksFor(rows * columns), kThreads, 0, stream>>>(
        values, scales, rows, columns, table, static_cast<T *>(out));
  });
}

void dequantizeNf4(const uint8_t *codes, const uint8_t *absmax,
                   const float *nested, const float *offset,
                   const nf4::Geometry &g, void *out, bool bf16,
                   cudaStream_t stream) {
  static const nf4::Tables tables = nf4::tables();
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    dequantizeNf4Kernel<<<blocksFor(g.rows * (g.columns / 2)), kThreads, 0,
                          stream>>>(codes, absmax, nested, offset, g, tables,
                                    static_cast<T *>(out));
  });
}

} // namespace twill::cuda
