//===- ElementwiseShapes.h - columns, dropout, pieces -----------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H

#include "opmodel/Shapes.h"
#include "runtime/backend/InstructionView.h"
#include "runtime/backend/shapes/ShapeRule.h"
#include "support/BlockedPieces.h"
#include "support/Dropout.h"

namespace twill {

/// The rows and columns of the ops by row or column, checked: DoRA's
/// row_sum_squares (input [rows..., columns] -> [rows...]), scale_columns
/// (input, scale [columns] -> like input) and its gradient (input, scale,
/// grad -> the input's, the scale's); a bias's add_columns (input, bias
/// [columns] -> like input) and column_sums (input -> [columns]).
struct ColumnsShape {
  int64_t rows, columns;
};

inline llvm::Expected<ColumnsShape> columnsShape(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return std::move(error);
  if (auto error = in.expect(in.numOperands(), in.numResults(), in.floatType()))
    return std::move(error);
  int64_t columns = in.dim(0, 0);
  return ColumnsShape{in.count(0) / std::max<int64_t>(columns, 1), columns};
}

/// A dropout's sizes: (input [tokens..., features], token index [tokens...],
/// micro-batch) -> like input; with `shard_axis` the features are this
/// rank's block, starting at `firstFeature`. The key's micro-batch is the
/// backend's to read from its buffer.
struct DropoutShape {
  int64_t tokens, features, firstFeature = 0;
  DropoutKey key;
};

inline llvm::Expected<DropoutShape> dropoutShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(3, 1, {type, I32, I64, type}))
    return std::move(error);
  if (auto error =
          in.check(shapes::dropout(in.shape(0), in.shape(1), in.shape(3))))
    return std::move(error);
  if (in.count(2) != 1)
    return in.fail("the micro-batch is not one value");
  DropoutShape shape{in.count(1), in.dim(0, 0), 0, {}};
  const DropoutAttributes &attributes = in->dropout();
  if (!(attributes.rate() > 0 && attributes.rate() < 1))
    return in.fail("needs a rate in (0, 1)");
  auto position = shardAxis(in, attributes.shard_axis());
  if (!position)
    return position.takeError();
  if (*position)
    shape.firstFeature = (*position)->coordinate * shape.features;
  shape.key.seed = uint32_t(attributes.seed());
  shape.key.stream = uint32_t(attributes.stream());
  shape.key.threshold = dropoutThreshold(attributes.rate());
  return shape;
}

/// split's and concat's pieces, as 2-D copies (one per piece, or per
/// piece and block with `blocks` > 1: support/BlockedPieces.h): `rows`
/// rows (one per index of the dims before `dim`) of `bytes`, a row
/// `piecePitch` bytes apart in the piece and `wholePitch` in the whole,
/// starting `pieceOffset` bytes into the piece's rows and `offset` into the
/// whole's.
struct PieceCopy {
  int piece; // its value index
  int64_t rows, bytes, offset, pieceOffset, piecePitch, wholePitch;
};

struct PiecesShape {
  int whole; // the whole value's index
  std::vector<PieceCopy> pieces;
};

inline llvm::Expected<PiecesShape> piecesShape(const InstructionView &in) {
  bool split = in.opcode() == SPLIT;
  int operands = in.numOperands(), results = in.numResults();
  if (split ? operands != 1 || results < 1 : results != 1 || operands < 1)
    return in.fail("puts pieces and one whole value together");
  PiecesShape shape;
  shape.whole = split ? 0 : operands;
  llvm::ArrayRef<int64_t> whole = in.shape(shape.whole);
  int64_t dim = in->split().dim();
  int first = split ? 1 : 0, count = split ? results : operands;
  std::vector<llvm::ArrayRef<int64_t>> pieces;
  for (int piece = first; piece < first + count; ++piece) {
    if (in.dtype(piece) != in.dtype(shape.whole))
      return in.fail("a piece differs from the whole in dtype");
    pieces.push_back(in.shape(piece));
  }
  llvm::Expected<std::vector<PieceRun>> runs =
      shapes::pieces(whole, pieces, dim, in->split().blocks());
  if (!runs)
    return in.check(runs.takeError());
  int64_t rows = 1, inner = bytesPerElement(in.dtype(shape.whole));
  for (int64_t d = 0; d < dim; ++d)
    rows *= whole[d];
  for (int64_t d = dim + 1; d < (int64_t)whole.size(); ++d)
    inner *= whole[d];
  std::vector<int64_t> sizes;
  for (llvm::ArrayRef<int64_t> piece : pieces)
    sizes.push_back(piece[dim]);
  for (const PieceRun &run : *runs)
    shape.pieces.push_back({first + int(run.piece), rows, run.length * inner,
                            run.wholeStart * inner, run.pieceStart * inner,
                            sizes[run.piece] * inner, whole[dim] * inner});
  return shape;
}

/// transpose's permutation: out dim i is in dim permutation[i], checked to
/// be a permutation of every dim.
inline llvm::Expected<llvm::ArrayRef<int64_t>>
transposePermutation(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(1, 1, {type, type}))
    return std::move(error);
  llvm::ArrayRef<int64_t> permutation(in->transpose().permutation().data(),
                                      in->transpose().permutation_size());
  if (auto error =
          in.check(shapes::transpose(in.shape(0), permutation, in.shape(1))))
    return std::move(error);
  return permutation;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H
