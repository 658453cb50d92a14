//===- CudaLayoutKernels.cu - collectives' data movement ------------------===//
//
// Slices along a dim, and blocks rearranged between a tensor's layout and
// the one NCCL moves.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaKernelSupport.cuh"

namespace twill::cuda {
namespace {

__global__ void copyAlongDimKernel(const char *from, int64_t fromSize,
                                   int64_t first, char *to, int64_t toSize,
                                   int64_t length, int64_t outer,
                                   int64_t sliceBytes) {
  GRID_STRIDE(i, outer * toSize * sliceBytes) {
    int64_t byte = i % sliceBytes, slice = (i / sliceBytes) % toSize;
    int64_t o = i / (sliceBytes * toSize);
    to[i] = slice < length
                ? from[(o * fromSize + first + slice) * sliceBytes + byte]
                : 0;
  }
}

template <typename T>
__global__ void arrangeBlocksKernel(const T *from, T *to, int64_t ranks,
                                    int64_t outer, int64_t block, int64_t whole,
                                    int64_t inner, bool toWhole) {
  GRID_STRIDE(i, ranks * outer * block * inner) {
    // i indexes the blocked layout [ranks][outer][block][inner].
    int64_t e = i % inner, r = (i / inner) % block;
    int64_t o = (i / (inner * block)) % outer, c = i / (inner * block * outer);
    int64_t position = c * block + r;
    int64_t wholeIndex = (o * whole + position) * inner + e;
    if (toWhole) {
      if (position < whole)
        to[wholeIndex] = from[i];
    } else {
      to[i] = position < whole ? from[wholeIndex] : T(0);
    }
  }
}

} // namespace

void copyAlongDim(const void *from, int64_t fromSize, int64_t first, void *to,
                  int64_t toSize, int64_t length, int64_t outer,
                  int64_t sliceBytes, cudaStream_t stream) {
  copyAlongDimKernel<<<blocksFor(outer * toSize * sliceBytes), kThreads, 0,
                       stream>>>(static_cast<const char *>(from), fromSize,
                                 first, static_cast<char *>(to), toSize, length,
                                 outer, sliceBytes);
}

void arrangeBlocks(const void *from, void *to, int64_t ranks, int64_t outer,
                   int64_t block, int64_t whole, int64_t inner, bool toWhole,
                   int elementBytes, cudaStream_t stream) {
  // Moved as their bits: elements of one, two or four bytes.
  auto launch = [&](auto *tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    arrangeBlocksKernel<<<blocksFor(ranks * outer * block * inner), kThreads, 0,
                          stream>>>(static_cast<const T *>(from),
                                    static_cast<T *>(to), ranks, outer, block,
                                    whole, inner, toWhole);
  };
  if (elementBytes == 1)
    launch(static_cast<uint8_t *>(nullptr));
  else if (elementBytes == 2)
    launch(static_cast<uint16_t *>(nullptr));
  else
    launch(static_cast<uint32_t *>(nullptr));
}

} // namespace twill::cuda
