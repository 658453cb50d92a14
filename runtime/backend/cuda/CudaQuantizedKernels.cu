//===- CudaQuantizedKernels.cu - quantized weights dequantized ------------===//
//
// A frozen weight stored in NF4 (support/Nf4.h) or FP8 (support/Fp8.h)
// formed in the compute dtype right before the products that read it, as
// the cpu backend forms it: the same fp32 arithmetic, value for value. A
// product's input rounded to e4m3 in blocks (round_to_fp8), and its codes
// and scales as cuBLASLt's FP8 GEMM reads them. One warp per block of
// values: its lanes find the largest magnitude together.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

#include <cuda_fp8.h>

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

constexpr int kWarpsPerBlock = kThreads / 32;

/// For each block of `block` values (the last of a row shorter) of `rows`
/// rows of `columns`, one warp each: the warp finds the block's largest
/// magnitude, then every lane calls `visit(row, block of the row, index of
/// the block's first value, its count, its scale, lane)`.
template <typename T, typename Visit>
__device__ void eachBlock(const T *in, int64_t rows, int64_t columns,
                          int64_t block, Visit visit) {
  int64_t blocksPerRow = (columns + block - 1) / block;
  int lane = threadIdx.x % 32;
  int64_t warp = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  for (int64_t b = warp; b < rows * blocksPerRow; b += warps) {
    int64_t r = b / blocksPerRow, kb = b % blocksPerRow;
    int64_t first = r * columns + kb * block;
    int64_t count = min(block, columns - kb * block);
    float amax = 0;
    for (int64_t c = lane; c < count; c += 32)
      amax = fmaxf(amax, fabsf(load(in[first + c])));
    for (int offset = 16; offset > 0; offset /= 2)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, offset));
    visit(r, kb, first, count, fp8::blockScale(amax), lane);
  }
}

template <typename T>
__global__ void roundToFp8Kernel(const T *in, int64_t rows, int64_t columns,
                                 int64_t block, T *out) {
  eachBlock(in, rows, columns, block,
            [&](int64_t, int64_t, int64_t first, int64_t count, float scale,
                int lane) {
              for (int64_t c = lane; c < count; c += 32)
                out[first + c] =
                    storeAs<T>(fp8::roundInBlock(load(in[first + c]), scale));
            });
}

/// Rounded values' e4m3 codes over their block's scale, found again (a
/// value rounded in its block is its code times the scale): the codes
/// row-major, the scales [blocks of a row][rows], the rows contiguous.
template <typename T>
__global__ void encodeFp8BlocksKernel(const T *in, int64_t rows,
                                      int64_t columns, int64_t block,
                                      uint8_t *codes, float *scales) {
  eachBlock(in, rows, columns, block,
            [&](int64_t r, int64_t kb, int64_t first, int64_t count,
                float scale, int lane) {
              for (int64_t c = lane; c < count; c += 32)
                codes[first + c] = __nv_cvt_float_to_fp8(
                    load(in[first + c]) / scale, __NV_SATFINITE, __NV_E4M3);
              if (lane == 0)
                scales[kb * rows + r] = scale;
            });
}

__global__ void broadcastRowScalesKernel(const float *rowScales, int64_t rows,
                                         int64_t blocks, float *out) {
  GRID_STRIDE(i, rows * blocks)
  out[i] = rowScales[i % rows];
}

int warpBlocksFor(int64_t warps) { return blocksFor(warps * 32); }

} // namespace

void roundToFp8(const void *in, int64_t rows, int64_t columns, int64_t block,
                void *out, bool bf16, cudaStream_t stream) {
  int64_t blocks = rows * ((columns + block - 1) / block);
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    roundToFp8Kernel<<<warpBlocksFor(blocks), kThreads, 0, stream>>>(
        static_cast<const T *>(in), rows, columns, block,
        static_cast<T *>(out));
  });
}

void encodeFp8Blocks(const void *in, int64_t rows, int64_t columns,
                     int64_t block, uint8_t *codes, float *scales, bool bf16,
                     cudaStream_t stream) {
  int64_t blocks = rows * ((columns + block - 1) / block);
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    encodeFp8BlocksKernel<<<warpBlocksFor(blocks), kThreads, 0, stream>>>(
        static_cast<const T *>(in), rows, columns, block, codes, scales);
  });
}

void broadcastRowScales(const float *rowScales, int64_t rows, int64_t blocks,
                        float *out, cudaStream_t stream) {
  broadcastRowScalesKernel<<<blocksFor(rows * blocks), kThreads, 0, stream>>>(
      rowScales, rows, blocks, out);
}

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
