//===- Layout.cpp - one rank's block of a tensor split over the mesh ------===//

#include "runtime/executable/Layout.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace twill;

int64_t BufferBlock::extentElements() const {
  int64_t count = 1;
  for (int64_t size : extent)
    count *= size;
  return count;
}

BufferBlock twill::wholeBlock(const Buffer &buffer) {
  BufferBlock block;
  block.globalShape.assign(buffer.shape().begin(), buffer.shape().end());
  block.localShape = block.extent = block.globalShape;
  block.offset.assign(block.globalShape.size(), 0);
  return block;
}

llvm::Expected<BufferBlock> twill::blockOf(const Buffer &buffer,
                                           const Mesh &mesh,
                                           llvm::ArrayRef<int> coordinates) {
  // Unplaced; a scalar placed on the mesh (split_dims, none splitting) has
  // a first holder like any whole value.
  if (buffer.global_shape_size() == 0 && buffer.split_dims_size() == 0)
    return wholeBlock(buffer);
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "buffer '" + buffer.name() + "': " + what);
  };
  int axes = mesh.shape_size();
  if (buffer.split_dims_size() != axes || (int)coordinates.size() != axes)
    return fail("its split has not one entry per mesh axis");
  BufferBlock block;
  block.globalShape.assign(buffer.global_shape().begin(),
                           buffer.global_shape().end());
  int rank = block.globalShape.size();
  block.offset.assign(rank, 0);
  block.localShape = block.extent = block.globalShape;
  // The last mesh axis splits a dim first, each axis the block the axes
  // after it left: blocks of ceil(size / n), each padded at its own end, so
  // the data of a block is a prefix of it.
  for (int axis = axes - 1; axis >= 0; --axis) {
    int dim = buffer.split_dims(axis);
    if (dim < 0) {
      block.primary = block.primary && coordinates[axis] == 0;
      continue;
    }
    if (dim >= rank)
      return fail(llvm::formatv("mesh axis {0} splits dim {1} of a {2}-d "
                                "tensor",
                                axis, dim, rank));
    int64_t &size = block.localShape[dim];
    size = (size + mesh.shape(axis) - 1) / mesh.shape(axis);
    int64_t start = coordinates[axis] * size;
    block.offset[dim] += start;
    block.extent[dim] = std::clamp<int64_t>(block.extent[dim] - start, 0, size);
  }
  if (!std::equal(block.localShape.begin(), block.localShape.end(),
                  buffer.shape().begin(), buffer.shape().end()))
    return fail("its shape is not its block of the whole tensor");
  return block;
}

/// Calls fn(wholeStart, localStart, extentStart, length) for every run of
/// the block's data along its last dim.
template <typename Fn> static void forEachRun(const BufferBlock &block, Fn fn) {
  int rank = block.extent.size();
  if (rank == 0) {
    fn(0, 0, 0, 1);
    return;
  }
  int64_t run = block.extent.back();
  if (run == 0 || block.extentElements() == 0)
    return;
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0, runs = block.extentElements() / run; r < runs; ++r) {
    int64_t whole = 0, local = 0;
    for (int d = 0; d < rank; ++d) {
      int64_t i = d + 1 < rank ? index[d] : 0;
      whole = whole * block.globalShape[d] + block.offset[d] + i;
      local = local * block.localShape[d] + i;
    }
    fn(whole, local, r * run, run);
    for (int d = rank - 2; d >= 0 && ++index[d] == block.extent[d]; --d)
      index[d] = 0;
  }
}

template <typename T>
void twill::sliceBlock(llvm::ArrayRef<T> whole, const BufferBlock &block,
                       llvm::MutableArrayRef<T> local, T pad) {
  std::fill(local.begin(), local.end(), pad);
  forEachRun(block, [&](int64_t from, int64_t to, int64_t, int64_t length) {
    std::copy_n(whole.begin() + from, length, local.begin() + to);
  });
}
template void twill::sliceBlock<float>(llvm::ArrayRef<float>,
                                       const BufferBlock &,
                                       llvm::MutableArrayRef<float>, float);
template void twill::sliceBlock<int32_t>(llvm::ArrayRef<int32_t>,
                                         const BufferBlock &,
                                         llvm::MutableArrayRef<int32_t>,
                                         int32_t);
template void twill::sliceBlock<uint8_t>(llvm::ArrayRef<uint8_t>,
                                         const BufferBlock &,
                                         llvm::MutableArrayRef<uint8_t>,
                                         uint8_t);

void twill::placeBlock(llvm::ArrayRef<float> data, const BufferBlock &block,
                       llvm::MutableArrayRef<float> local) {
  std::fill(local.begin(), local.end(), 0.0f);
  forEachRun(block, [&](int64_t, int64_t to, int64_t from, int64_t length) {
    std::copy_n(data.begin() + from, length, local.begin() + to);
  });
}

void twill::addBlock(llvm::ArrayRef<float> local, const BufferBlock &block,
                     llvm::MutableArrayRef<float> whole) {
  forEachRun(block, [&](int64_t to, int64_t from, int64_t, int64_t length) {
    for (int64_t i = 0; i < length; ++i)
      whole[to + i] += local[from + i];
  });
}
