//===- TensorSplit.h - a row-major tensor around one dim --------*- C++ -*-===//
//
// What every transport's gathers, scatters and exchanges lay out blocks by
// (MpiTransport.cpp, SocketProtocol.cpp, LocalCommunicator.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_COMM_TENSORSPLIT_H
#define TWILL_RUNTIME_COMM_TENSORSPLIT_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace twill::comm {

/// The elements of a shape.
inline int64_t product(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

/// A row-major tensor seen as [outer, dim, inner] around `dim`.
struct Split {
  int64_t outer, length, inner;
  Split(llvm::ArrayRef<int64_t> shape, int64_t dim)
      : outer(product(shape.take_front(dim))), length(shape[dim]),
        inner(product(shape.drop_front(dim + 1))) {}
};

} // namespace twill::comm

#endif // TWILL_RUNTIME_COMM_TENSORSPLIT_H
