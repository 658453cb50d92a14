//===- MatmulShape.h - a matmul's sizes and its GEMM ------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H

#include "opmodel/Shapes.h"
#include "runtime/backend/Gemm.h"
#include "runtime/backend/InstructionView.h"
#include "support/Nf4.h"

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
  if (auto error = in.expect(operands, 1, type))
    return std::move(error);
  MatmulShape shape;
  shape.hasAddend = operands == 3;
  shape.alpha = in->matmul().alpha();
  shape.result = operands;
  shape.transposeLhs = in->matmul().transpose_lhs();
  shape.transposeRhs = in->matmul().transpose_rhs();
  llvm::Expected<shapes::MatmulDims> dims =
      shapes::matmul(in.shape(0), in.shape(1), in.shape(shape.result),
                     shape.transposeLhs, shape.transposeRhs);
  if (!dims)
    return in.check(dims.takeError());
  if (shape.hasAddend)
    if (auto error = in.check(
            shapes::expectShape("addend", in.shape(2), in.shape(shape.result))))
      return std::move(error);
  shape.batch = dims->batch;
  shape.m = dims->m;
  shape.n = dims->n;
  shape.k = dims->k;
  shape.rhsBatched = dims->rhsBatched;
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

/// A dequantize's block of its weight (the operands: codes, scales' codes,
/// nested scales, offset): the whole weight, or with `shard_axis` this
/// rank's block of its rows or (whole blocks of) its columns.
inline llvm::Expected<nf4::Geometry> nf4Geometry(const InstructionView &in) {
  if (auto error = in.expect(4, 1, {U8, U8, F32, F32, in.floatType(4)}))
    return std::move(error);
  const DequantizeNf4Attributes &a = in->dequantize_nf4();
  if (auto error = in.check(shapes::dequantize(
          in.shape(0), in.shape(1), in.shape(2), in.shape(3), in.shape(4),
          a.block_size(), a.nested_block_size(), a.rows(), a.columns())))
    return std::move(error);
  nf4::Geometry g{
      in.shape(4)[0], in.shape(4)[1],       0, 0, a.rows(), a.columns(),
      a.block_size(), a.nested_block_size()};
  auto position = shardAxis(in, a.shard_axis());
  if (!position)
    return position.takeError();
  if (*position) {
    // A block of whole blocks of columns, or else of rows.
    if (g.columns < g.wholeColumns)
      g.firstColumn = (*position)->coordinate * g.columns;
    else
      g.firstRow = (*position)->coordinate * g.rows;
    if (g.firstColumn + g.columns > g.wholeColumns)
      return in.fail("its block of columns runs past the weight's");
  }
  return g;
}

/// A dequantize_fp8's rows and columns (operands: values, scales).
struct Fp8Shape {
  int64_t rows, columns;
};
inline llvm::Expected<Fp8Shape> fp8Shape(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {U8, F32, in.floatType(2)}))
    return std::move(error);
  if (auto error = in.check(
          shapes::dequantizeFp8(in.shape(0), in.shape(1), in.shape(2))))
    return std::move(error);
  return Fp8Shape{in.shape(2)[0], in.shape(2)[1]};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H
