//===- CudaElementwiseKernels.cu - elementwise ops, casts, transposes -----===//
//
// One thread per element (grid-stride), bf16 or fp32 values computed in
// fp32, as the cpu kernels compute them.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"
#include "support/ElementMath.h"

namespace twill::cuda {
namespace {

template <typename T>
__global__ void fillKernel(T *out, int64_t count, float value) {
  GRID_STRIDE(i, count) out[i] = storeAs<T>(value);
}

template <typename T>
__global__ void castKernel(const void *in, CastSource from, T *out,
                           int64_t count) {
  GRID_STRIDE(i, count) {
    float value = 0;
    switch (from) {
    case CastSource::F32:
      value = static_cast<const float *>(in)[i];
      break;
    case CastSource::I32:
      value = float(static_cast<const int32_t *>(in)[i]);
      break;
    case CastSource::I64:
      value = float(static_cast<const int64_t *>(in)[i]);
      break;
    case CastSource::BF16:
      value = load(static_cast<const __nv_bfloat16 *>(in)[i]);
      break;
    }
    out[i] = storeAs<T>(value);
  }
}

/// The element math's exponential on the device.
struct DeviceExp {
  __device__ float operator()(float x) const { return expf(x); }
};

template <typename T>
__global__ void binaryKernel(Binary op, const T *lhs, const T *rhs, T *out,
                             int64_t count) {
  GRID_STRIDE(i, count) {
    float a = load(lhs[i]), b = load(rhs[i]), value = 0;
    switch (op) {
    case Binary::Add:
      value = a + b;
      break;
    case Binary::Mul:
      value = a * b;
      break;
    case Binary::Div:
      value = a / b;
      break;
    case Binary::Swiglu:
      value = math::swiglu(a, b, DeviceExp());
      break;
    case Binary::Geglu:
      value = math::geglu(a, b, DeviceExp());
      break;
    case Binary::SigmoidGate:
      value = math::sigmoidGate(a, b, DeviceExp());
      break;
    }
    out[i] = storeAs<T>(value);
  }
}

template <typename T>
__global__ void scaleKernel(const T *x, float factor, T *out, int64_t count) {
  GRID_STRIDE(i, count) out[i] = storeAs<T>(load(x[i]) * factor);
}

template <typename T>
__global__ void softcapKernel(const T *x, const T *grad, float cap, T *out,
                              int64_t count) {
  GRID_STRIDE(i, count) {
    out[i] = storeAs<T>(grad ? math::softcapGrad(load(x[i]), load(grad[i]), cap)
                             : math::softcap(load(x[i]), cap));
  }
}

template <typename T>
__global__ void sqrtKernel(const T *x, T *out, int64_t count) {
  GRID_STRIDE(i, count) out[i] = storeAs<T>(sqrtf(load(x[i])));
}

/// A warp per row, the grid's warps striding over the rows: each lane sums
/// a stride of the columns, then the warp adds its lanes' sums.
template <typename T>
__global__ void rowSumSquaresKernel(const T *x, int64_t rows, int64_t columns,
                                    T *out) {
  int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  int lane = threadIdx.x % 32;
  for (int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       row < rows; row += warps) {
    float sum = 0;
    for (int64_t c = lane; c < columns; c += 32) {
      float value = load(x[row * columns + c]);
      sum += value * value;
    }
    for (int offset = 16; offset > 0; offset /= 2)
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0)
      out[row] = storeAs<T>(sum);
  }
}

template <typename T>
__global__ void scaleColumnsKernel(const T *x, const T *scale, int64_t rows,
                                   int64_t columns, T *out) {
  GRID_STRIDE(i, rows * columns)
  out[i] = storeAs<T>(load(x[i]) * load(scale[i % columns]));
}

template <typename T>
__global__ void addColumnsKernel(const T *x, const T *bias, int64_t rows,
                                 int64_t columns, T *out) {
  GRID_STRIDE(i, rows * columns)
  out[i] = storeAs<T>(load(x[i]) + load(bias[i % columns]));
}

/// Each column's sum over the rows of x (times weight, if given): a thread
/// per column, consecutive threads reading consecutive columns.
template <typename T>
__global__ void columnSumsKernel(const T *x, const T *weight, int64_t rows,
                                 int64_t columns, T *out) {
  GRID_STRIDE(c, columns) {
    float sum = 0;
    for (int64_t r = 0; r < rows; ++r)
      sum += load(x[r * columns + c]) *
             (weight ? load(weight[r * columns + c]) : 1.0f);
    out[c] = storeAs<T>(sum);
  }
}

/// One thread per group of four global features of a token: one Philox
/// call gives the four bits (support/Dropout.h). A block of features that
/// starts inside a group has its first and last groups partly elsewhere.
template <typename T>
__global__ void dropoutKernel(const T *x, const int32_t *tokenIndex,
                              const int64_t *microBatch, int64_t tokens,
                              int64_t features, int64_t firstFeature,
                              int64_t groupsPerToken, DropoutKey key,
                              float scale, T *out) {
  key.microBatch = uint64_t(*microBatch);
  GRID_STRIDE(i, tokens * groupsPerToken) {
    int64_t row = i / groupsPerToken;
    int64_t group = firstFeature / 4 + i % groupsPerToken;
    unsigned keeps =
        dropoutKeeps4(key, uint32_t(tokenIndex[row]), uint32_t(group));
    for (int lane = 0; lane < 4; ++lane) {
      int64_t column = 4 * group + lane - firstFeature;
      if (column < 0 || column >= features)
        continue;
      int64_t at = row * features + column;
      out[at] = storeAs<T>((keeps >> lane) & 1 ? load(x[at]) * scale : 0.0f);
    }
  }
}

template <typename T>
__global__ void gatedGradKernel(Gated kind, const T *gateIn, const T *upIn,
                                const T *gradIn, T *gateGrad, T *upGrad,
                                int64_t count) {
  GRID_STRIDE(i, count) {
    float gate = load(gateIn[i]), up = load(upIn[i]), grad = load(gradIn[i]);
    float dGate = 0, dUp = 0;
    switch (kind) {
    case Gated::Swiglu:
      math::swigluGrad(gate, up, grad, dGate, dUp, DeviceExp());
      break;
    case Gated::Geglu:
      math::gegluGrad(gate, up, grad, dGate, dUp, DeviceExp());
      break;
    case Gated::Sigmoid:
      math::sigmoidGateGrad(gate, up, grad, dGate, dUp, DeviceExp());
      break;
    }
    gateGrad[i] = storeAs<T>(dGate);
    upGrad[i] = storeAs<T>(dUp);
  }
}

struct Permutation {
  int64_t shape[8], permutation[8];
  int rank;
};

template <typename T>
__global__ void transposeKernel(const T *x, Permutation p, T *out,
                                int64_t count) {
  GRID_STRIDE(i, count) {
    // Output index -> input index: output dim d is input dim permutation[d].
    int64_t remaining = i, source = 0, stride[8];
    int64_t running = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
      stride[d] = running;
      running *= p.shape[d];
    }
    for (int d = p.rank - 1; d >= 0; --d) {
      int64_t size = p.shape[p.permutation[d]];
      source += (remaining % size) * stride[p.permutation[d]];
      remaining /= size;
    }
    out[i] = x[source];
  }
}

} // namespace

void fill(void *out, int64_t count, float value, bool bf16,
          cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    fillKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<STORED(tag) *>(out), count, value);
  });
}

void cast(const void *in, CastSource from, void *out, bool toBF16,
          int64_t count, cudaStream_t stream) {
  stored(toBF16, [&](auto *tag) {
    castKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        in, from, static_cast<STORED(tag) *>(out), count);
  });
}

void binary(Binary op, const void *lhs, const void *rhs, void *out,
            int64_t count, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    binaryKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        op, static_cast<const T *>(lhs), static_cast<const T *>(rhs),
        static_cast<T *>(out), count);
  });
}

void scale(const void *x, double factor, void *out, int64_t count, bool bf16,
           cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    scaleKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), float(factor), static_cast<T *>(out), count);
  });
}

void squareRoot(const void *x, void *out, int64_t count, bool bf16,
                cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    sqrtKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<T *>(out), count);
  });
}

void softcap(const void *x, const void *grad, double cap, void *out,
             int64_t count, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    softcapKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(grad), float(cap),
        static_cast<T *>(out), count);
  });
}

void rowSumSquares(const void *x, int64_t rows, int64_t columns, void *out,
                   bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    rowSumSquaresKernel<<<blocksFor(rows * 32), kThreads, 0, stream>>>(
        static_cast<const T *>(x), rows, columns, static_cast<T *>(out));
  });
}

void scaleColumns(const void *x, const void *scale, int64_t rows,
                  int64_t columns, void *out, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    scaleColumnsKernel<<<blocksFor(rows * columns), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(scale), rows,
        columns, static_cast<T *>(out));
  });
}

void scaleColumnsGrad(const void *x, const void *scale, const void *grad,
                      int64_t rows, int64_t columns, void *inputGrad,
                      void *scaleGrad, bool bf16, cudaStream_t stream) {
  scaleColumns(grad, scale, rows, columns, inputGrad, bf16, stream);
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    columnSumsKernel<<<blocksFor(columns), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(grad), rows, columns,
        static_cast<T *>(scaleGrad));
  });
}

void addColumns(const void *x, const void *bias, int64_t rows, int64_t columns,
                void *out, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    addColumnsKernel<<<blocksFor(rows * columns), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(bias), rows, columns,
        static_cast<T *>(out));
  });
}

void columnSums(const void *x, int64_t rows, int64_t columns, void *out,
                bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    columnSumsKernel<<<blocksFor(columns), kThreads, 0, stream>>>(
        static_cast<const T *>(x), static_cast<const T *>(nullptr), rows,
        columns, static_cast<T *>(out));
  });
}

void dropout(const void *x, const int32_t *tokenIndex,
             const int64_t *microBatch, int64_t tokens, int64_t features,
             int64_t firstFeature, const DropoutKey &key, double rate,
             void *out, bool bf16, cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    int64_t groups = dropoutGroups(firstFeature, features);
    dropoutKernel<<<blocksFor(tokens * groups), kThreads, 0, stream>>>(
        static_cast<const T *>(x), tokenIndex, microBatch, tokens, features,
        firstFeature, groups, key, float(1.0 / (1.0 - rate)),
        static_cast<T *>(out));
  });
}

void gatedGrad(Gated kind, const void *gate, const void *up, const void *grad,
               void *gateGrad, void *upGrad, int64_t count, bool bf16,
               cudaStream_t stream) {
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    gatedGradKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        kind, static_cast<const T *>(gate), static_cast<const T *>(up),
        static_cast<const T *>(grad), static_cast<T *>(gateGrad),
        static_cast<T *>(upGrad), count);
  });
}

void transpose(const void *x, const int64_t *shape, const int64_t *permutation,
               int rank, void *out, bool bf16, cudaStream_t stream) {
  Permutation p{};
  p.rank = rank;
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    p.shape[d] = shape[d];
    p.permutation[d] = permutation[d];
    count *= shape[d];
  }
  stored(bf16, [&](auto *tag) {
    using T = STORED(tag);
    transposeKernel<<<blocksFor(count), kThreads, 0, stream>>>(
        static_cast<const T *>(x), p, static_cast<T *>(out), count);
  });
}

} // namespace twill::cuda
