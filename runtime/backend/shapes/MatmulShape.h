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

/// The block `weight` ([rows, columns]) of an NF4 weight whose parts are
/// operands `first` to `first + 3` (codes, scales' codes, nested scales,
/// offset) and whose attributes `a` has (a dequantize's or a quantized
/// matmul's): the whole weight, or with `shard_axis` this rank's block of
/// its rows or (whole blocks of) its columns.
template <typename Attributes>
llvm::Expected<nf4::Geometry> nf4Geometry(const InstructionView &in, int first,
                                          shapes::Shape weight,
                                          const Attributes &a) {
  if (auto error = in.check(shapes::dequantize(
          in.shape(first), in.shape(first + 1), in.shape(first + 2),
          in.shape(first + 3), weight, a.block_size(), a.nested_block_size(),
          a.rows(), a.columns())))
    return std::move(error);
  nf4::Geometry g{weight[0],
                  weight[1],
                  0,
                  0,
                  a.rows(),
                  a.columns(),
                  a.block_size(),
                  a.nested_block_size()};
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

/// A dequantize_nf4's block of its weight (its result).
inline llvm::Expected<nf4::Geometry> nf4Geometry(const InstructionView &in) {
  if (auto error = in.expect(4, 1, {U8, U8, F32, F32, in.floatType(4)}))
    return std::move(error);
  return nf4Geometry(in, 0, in.shape(4), in->dequantize_nf4());
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

/// A round_to_fp8's rows (every dim but the last) of `columns` values,
/// rounded in blocks of `block`.
struct RoundToFp8Shape {
  int64_t rows, columns, block;
};
inline llvm::Expected<RoundToFp8Shape>
roundToFp8Shape(const InstructionView &in) {
  if (auto error = in.expect(1, 1, in.floatType()))
    return std::move(error);
  if (auto error =
          in.check(shapes::expectShape("result", in.shape(1), in.shape(0))))
    return std::move(error);
  int64_t block = in->round_to_fp8().block_size();
  if (in.shape(0).empty() || block <= 0)
    return in.fail("rounds blocks of positive size along a last dim");
  int64_t columns = in.shape(0).back();
  return RoundToFp8Shape{columns ? in.count(0) / columns : 0, columns, block};
}

/// A quantized_matmul: its product (the rhs the weight), and the weight
/// whose parts are operands 1 to 4 (NF4: `geometry` its block) or 1 and 2
/// (FP8), `rows` x `columns` of it held here.
struct QuantizedMatmulShape {
  MatmulShape product;
  bool nf4;
  nf4::Geometry geometry;
  int64_t rows, columns;
  int parts; // how many operands after the lhs are the weight's
};

inline llvm::Expected<QuantizedMatmulShape>
quantizedMatmulShape(const InstructionView &in) {
  const QuantizedMatmulAttributes &a = in->quantized_matmul();
  QuantizedMatmulShape s;
  s.nf4 = a.block_size() > 0;
  s.parts = s.nf4 ? 4 : 2;
  DType type = in.floatType(0);
  int operands = in.numOperands() == 2 + s.parts ? 2 + s.parts : 1 + s.parts;
  std::vector<DType> dtypes = {type};
  for (DType part : s.nf4 ? std::vector<DType>{U8, U8, F32, F32}
                          : std::vector<DType>{U8, F32})
    dtypes.push_back(part);
  if (operands == 2 + s.parts)
    dtypes.push_back(type);
  dtypes.push_back(type);
  if (auto error = in.expect(operands, 1, dtypes))
    return std::move(error);
  // The weight's block: NF4's codes hold two values a byte.
  std::vector<int64_t> weight(in.shape(1).begin(), in.shape(1).end());
  if (weight.size() != 2)
    return in.fail("the weight's codes must be a matrix");
  if (s.nf4) {
    weight[1] *= 2;
    llvm::Expected<nf4::Geometry> g = nf4Geometry(in, 1, weight, a);
    if (!g)
      return g.takeError();
    s.geometry = *g;
  } else if (auto error = in.check(
                 shapes::dequantizeFp8(in.shape(1), in.shape(2), weight))) {
    return std::move(error);
  }
  s.rows = weight[0];
  s.columns = weight[1];
  MatmulShape &p = s.product;
  p.hasAddend = operands == 2 + s.parts;
  p.alpha = a.alpha();
  p.result = operands;
  p.transposeLhs = false;
  p.transposeRhs = a.transpose_rhs();
  llvm::Expected<shapes::MatmulDims> dims = shapes::matmul(
      in.shape(0), weight, in.shape(p.result), false, p.transposeRhs);
  if (!dims)
    return in.check(dims.takeError());
  if (p.hasAddend)
    if (auto error = in.check(shapes::expectShape(
            "addend", in.shape(1 + s.parts), in.shape(p.result))))
      return std::move(error);
  p.batch = dims->batch;
  p.m = dims->m;
  p.n = dims->n;
  p.k = dims->k;
  p.rhsBatched = false;
  return s;
}

/// Rows [first, first + count) of the NF4 block `g` as a block of their
/// own: its codes start first * columns / 2 bytes in, its scales' codes
/// first * columns / blockSize.
inline nf4::Geometry nf4Rows(nf4::Geometry g, int64_t first, int64_t count) {
  g.rows = count;
  g.firstRow += first;
  return g;
}

/// How many of the weight's rows a panel of at most `bytes` holds, formed
/// in values of `elementBytes` (at least one).
inline int64_t panelRows(const QuantizedMatmulShape &s, int64_t bytes,
                         int64_t elementBytes) {
  return std::max<int64_t>(
      1, bytes / std::max<int64_t>(1, s.columns * elementBytes));
}

/// The GEMM of the weight's rows [first, first + count), formed in `panel`
/// (row-major, `columns` wide), onto `out`, which already holds the addend
/// or zeros: with transpose_rhs the rows are the result's columns [first,
/// first + count) (the forward's x W^T); else they are terms of the sum,
/// the lhs's columns [first, first + count) (the backward's dy W). The
/// batch rows are one tall matrix: the weight is shared.
inline RowMajorGemm panelGemm(const QuantizedMatmulShape &s, int64_t first,
                              int64_t count, const void *lhs, const void *panel,
                              void *out, int64_t elementBytes) {
  const MatmulShape &p = s.product;
  auto at = [&](const void *base, int64_t elements) {
    return static_cast<const char *>(base) + elements * elementBytes;
  };
  RowMajorGemm g;
  g.m = p.batch * p.m;
  g.a = lhs, g.lda = p.k;
  g.b = panel, g.ldb = s.columns;
  g.c = out, g.ldc = p.n;
  g.transB = p.transposeRhs;
  g.n = p.transposeRhs ? count : p.n;
  g.k = p.transposeRhs ? p.k : count;
  if (p.transposeRhs)
    g.c = const_cast<char *>(at(out, first));
  else
    g.a = at(lhs, first);
  g.alpha = float(p.alpha);
  g.accumulate = true;
  g.floatResult = false;
  return g;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_MATMULSHAPE_H
