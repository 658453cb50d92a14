//===- Layout.h - one rank's block of a tensor split over the mesh -*- C++ -*-===//
//
// A parameter, state or input the compiler split over the mesh is held by
// each rank as one block of the whole tensor (Buffer.global_shape and
// split_dims). This computes which block, and moves values between the
// whole tensor and the block: loading a checkpoint slice, slicing a batch,
// and putting an adapter back together from its blocks.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_EXECUTABLE_LAYOUT_H
#define TWILL_RUNTIME_EXECUTABLE_LAYOUT_H

#include "proto/executable.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace twill {

struct BufferBlock {
  /// The whole tensor's shape, and this rank's buffer's.
  std::vector<int64_t> globalShape, localShape;
  /// Where the block starts in the whole tensor, and how much of it holds
  /// data in each dim (the rest of the buffer is padding).
  std::vector<int64_t> offset, extent;
  /// Whether this rank is the first of the ranks holding the same block
  /// (coordinate 0 on every axis that does not split it): the one that
  /// contributes it when the whole is put together.
  bool primary = true;

  int64_t extentElements() const;
};

/// The block `coordinates` (one per axis of `mesh`) hold of `buffer`; fails
/// if the buffer's shape is not that block's.
llvm::Expected<BufferBlock> blockOf(const Buffer &buffer, const Mesh &mesh,
                                    llvm::ArrayRef<int> coordinates);

/// The whole buffer, for a program without a mesh.
BufferBlock wholeBlock(const Buffer &buffer);

/// local = the block of `whole`; padding gets `pad`.
template <typename T>
void sliceBlock(llvm::ArrayRef<T> whole, const BufferBlock &block,
                llvm::MutableArrayRef<T> local, T pad = T());
/// local = `data` (the block's extent, row-major); padding gets zeros.
void placeBlock(llvm::ArrayRef<float> data, const BufferBlock &block,
                llvm::MutableArrayRef<float> local);
/// whole += the data of the block in `local`.
void addBlock(llvm::ArrayRef<float> local, const BufferBlock &block,
              llvm::MutableArrayRef<float> whole);

} // namespace twill

#endif // TWILL_RUNTIME_EXECUTABLE_LAYOUT_H
