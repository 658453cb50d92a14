//===- MatmulShape.h - a matmul's sizes and its GEMM ------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/Gemm.h"

namespace twill {

/// A matmul's sizes: `batch` products of op(lhs) [m, k] and op(rhs) [k, n]
/// (rhs shared unless `rhsBatched`); a matrix result from batched operands
/// sums over the batch, which becomes more rows of k. The result is
/// `alpha` times the product, plus the third operand (`addend`, of the
/// result's shape) when there is one: the epilogue twill-fuse-epilogues
/// folded in.
struct MatmulShape {
  int64_t batch, m, n, k;
  bool transposeLhs, transposeRhs, rhsBatched;
  bool hasAddend;
  double alpha;
  int result; // the result's index: after the operands
};

inline llvm::Expected<MatmulShape> matmulShape(const InstructionView &in) {
  DType type = in.floatType();
  int operands = in.numOperands() == 3 ? 3 : 2;
  if (auto error =
          in.expect(operands, 1, std::vector<DType>(operands + 1, type),
                    std::vector<int>(operands + 1, 2)))
    return std::move(error);
  MatmulShape shape;
  shape.hasAddend = operands == 3;
  shape.alpha = in->matmul().alpha();
  shape.result = operands;
  shape.transposeLhs = in->matmul().transpose_lhs();
  shape.transposeRhs = in->matmul().transpose_rhs();
  shape.m = in.dim(0, shape.transposeLhs ? 0 : 1);
  shape.k = in.dim(0, shape.transposeLhs ? 1 : 0);
  shape.n = in.dim(1, shape.transposeRhs ? 1 : 0);
  int64_t rhsK = in.dim(1, shape.transposeRhs ? 0 : 1);
  // The batch from the dims themselves: an empty product (k = 0) still has
  // its rows and columns.
  shape.batch = 1;
  for (int64_t dim : in.shape(0).drop_back(2))
    shape.batch *= dim;
  shape.rhsBatched = in.shape(1).size() > 2;
  if (in.shape(shape.result).size() == 2 && in.shape(0).size() > 2) {
    if (!shape.transposeLhs || shape.transposeRhs)
      return in.fail("sums over batch dims only with transpose_lhs");
    shape.k *= shape.batch;
    rhsK = in.count(1) / std::max<int64_t>(shape.n, 1);
    shape.batch = 1;
    shape.rhsBatched = false;
  }
  if (shape.k != rhsK ||
      in.count(shape.result) != shape.batch * shape.m * shape.n ||
      (shape.rhsBatched && in.count(1) != shape.batch * shape.k * shape.n))
    return in.fail("operand shapes do not multiply");
  if (shape.hasAddend && in.count(2) != in.count(shape.result))
    return in.fail("the addend differs from the result in size");
  return shape;
}

/// The matmul as one row-major GEMM onto `out`: a weight shared by the
/// batch makes the batch rows one tall matrix, other batches are strided;
/// with an addend it accumulates (the backend puts the addend in `out`
/// first, or hands it to its library as C).
inline RowMajorGemm matmulGemm(const MatmulShape &s, const void *lhs,
                               const void *rhs, void *out) {
  RowMajorGemm g;
  g.transA = s.transposeLhs, g.transB = s.transposeRhs;
  g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
  g.a = lhs, g.lda = s.transposeLhs ? s.m : s.k, g.strideA = s.m * s.k;
  g.b = rhs, g.ldb = s.transposeRhs ? s.k : s.n;
  g.strideB = s.rhsBatched ? s.k * s.n : 0;
  g.c = out, g.ldc = s.n, g.strideC = s.m * s.n;
  if (!s.rhsBatched && !s.transposeLhs) {
    g.m *= g.batch;
    g.batch = 1;
  }
  g.alpha = float(s.alpha);
  g.accumulate = s.hasAddend;
  g.floatResult = false; // the result has the operands' type
  return g;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H
