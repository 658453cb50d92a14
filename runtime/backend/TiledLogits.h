//===- TiledLogits.h - the GEMMs of a loss formed tile by tile --*- C++ -*-===//
//
// linear_cross_entropy never holds the logits of every position: it forms
// them for one tile of rows at a time, and its gradient turns each tile
// into the logits' gradient in place before multiplying it out. These are
// its GEMMs, described once for every backend.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_TILEDLOGITS_H
#define TWILL_RUNTIME_BACKEND_TILEDLOGITS_H

#include "runtime/backend/Blocks.h"
#include "runtime/backend/Gemm.h"

#include <type_traits>

namespace twill {

/// linear_cross_entropy and its gradient: `rows` positions of `hidden`
/// values (operand 0), a weight of `block.columns` rows (operand 1), the
/// labels (operand 2) and the tile (the last result), whose `tileRows` rows
/// take the logits of one tile of positions at a time. The GEMMs are the
/// same on every backend; with a `softcap` (Gemma 2's), each backend caps
/// the tile once formed (softcap tanh(logit / softcap)), and scales its
/// gradient by 1 - (capped / softcap)^2.
struct TiledLogits {
  int64_t rows, hidden, tileRows;
  VocabBlock block;
  int64_t elementBytes;
  bool wrtWeight;
  double softcap = 0; // none

  /// tile[0..count) = input rows [first, first + count) times weight^T.
  RowMajorGemm logits(const void *input, const void *weight, void *tile,
                      int64_t first, int64_t count) const {
    RowMajorGemm g;
    g.transB = true;
    g.m = count, g.n = block.columns, g.k = hidden;
    g.a = at(input, first * hidden), g.lda = hidden;
    g.b = weight, g.ldb = hidden;
    g.c = tile, g.ldc = block.columns;
    g.floatResult = false;
    return g;
  }
  /// Input gradient rows [first, first + count) = the tile's times weight.
  RowMajorGemm inputGrad(const void *tile, const void *weight, void *out,
                         int64_t first, int64_t count) const {
    RowMajorGemm g;
    g.m = count, g.n = hidden, g.k = block.columns;
    g.a = tile, g.lda = block.columns;
    g.b = weight, g.ldb = hidden;
    g.c = at(out, first * hidden), g.ldc = hidden;
    g.floatResult = false;
    return g;
  }
  /// Weight gradient (+)= the tile^T times input rows [first, first +
  /// count): the first tile writes it, the others add.
  RowMajorGemm weightGrad(const void *tile, const void *input, void *out,
                          int64_t first, int64_t count) const {
    RowMajorGemm g;
    g.transA = true;
    g.m = block.columns, g.n = hidden, g.k = count;
    g.a = tile, g.lda = block.columns;
    g.b = at(input, first * hidden), g.ldb = hidden;
    g.c = out, g.ldc = hidden;
    g.accumulate = first > 0;
    g.floatResult = false;
    return g;
  }

private:
  template <typename T> T *at(T *base, int64_t elements) const {
    using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
    return reinterpret_cast<T *>(reinterpret_cast<Byte *>(base) +
                                 elements * elementBytes);
  }
};

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_TILEDLOGITS_H
