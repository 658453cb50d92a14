//===- ElementwiseShapes.h - columns, dropout, pieces -----------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H

#include "runtime/backend/InstructionView.h"
#include "support/BlockedPieces.h"
#include "support/Dropout.h"

namespace twill {

/// The rows and columns of DoRA's ops, checked: row_sum_squares (input
/// [rows..., columns] -> [rows...]), scale_columns (input, scale
/// [columns] -> like input) and its gradient (input, scale, grad -> the
/// input's, the scale's).
struct ColumnsShape {
  int64_t rows, columns;
};

inline llvm::Expected<ColumnsShape> columnsShape(const InstructionView &in) {
  DType type = in.floatType();
  int operands = 1, results = 1;
  if (in.opcode() == SCALE_COLUMNS)
    operands = 2;
  else if (in.opcode() == SCALE_COLUMNS_GRAD)
    operands = 3, results = 2;
  std::vector<int> minRanks(operands + results, 0);
  minRanks.front() = 1; // the input has columns
  if (auto error = in.expect(operands, results,
                             std::vector<DType>(operands + results, type),
                             minRanks))
    return std::move(error);
  ColumnsShape shape{0, in.dim(0, 0)};
  shape.rows = in.count(0) / shape.columns;
  if (in.opcode() == ROW_SUM_SQUARES) {
    if (in.count(1) != shape.rows)
      return in.fail("result is not one per row of the input");
    return shape;
  }
  // The scale (and its gradient) one per column; the rest like the input.
  for (int index = 1; index < operands + results; ++index) {
    bool perColumn = index == 1 || index == 4;
    if (in.count(index) != (perColumn ? shape.columns : in.count(0)))
      return in.fail(llvm::formatv("operand or result {0} has {1} values, "
                                   "expected {2}",
                                   index, in.count(index),
                                   perColumn ? shape.columns : in.count(0)));
  }
  return shape;
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
  if (auto error = in.expect(3, 1, {type, I32, I64, type}, {2, 1, 0, 2}))
    return std::move(error);
  if (in.count(3) != in.count(0) || in.count(2) != 1)
    return in.fail("result and input differ, or the micro-batch is not one "
                   "value");
  DropoutShape shape{in.count(1), in.dim(0, 0), 0, {}};
  if (shape.tokens * shape.features != in.count(0))
    return in.fail("input size is not tokens x features");
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
  if (dim < 0 || dim >= (int64_t)whole.size())
    return in.fail("its dim is not a dim of the whole");
  int64_t rows = 1, inner = bytesPerElement(in.dtype(shape.whole));
  for (int64_t d = 0; d < dim; ++d)
    rows *= whole[d];
  for (int64_t d = dim + 1; d < (int64_t)whole.size(); ++d)
    inner *= whole[d];
  int first = split ? 1 : 0, count = split ? results : operands;
  std::vector<int64_t> sizes;
  for (int piece = first; piece < first + count; ++piece) {
    llvm::ArrayRef<int64_t> dims = in.shape(piece);
    bool fits =
        in.dtype(piece) == in.dtype(shape.whole) && dims.size() == whole.size();
    for (int64_t d = 0; fits && d < (int64_t)whole.size(); ++d)
      fits = d == dim || dims[d] == whole[d];
    if (!fits)
      return in.fail("a piece differs from the whole beyond its dim");
    sizes.push_back(dims[dim]);
  }
  llvm::Expected<std::vector<PieceRun>> runs =
      blockedPieceRuns(whole[dim], in->split().blocks(), sizes);
  if (!runs)
    return in.fail(llvm::toString(runs.takeError()));
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
  if (auto error = in.expect(1, 1, {type, type}, {0, 0}))
    return std::move(error);
  const auto &permutation = in->transpose().permutation();
  llvm::ArrayRef<int64_t> shape = in.shape(0);
  if (permutation.size() != (int)shape.size())
    return in.fail("needs a permutation of every dim");
  std::vector<bool> seen(shape.size(), false);
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= (int64_t)shape.size() || seen[dim])
      return in.fail("permutation is not a permutation");
    seen[dim] = true;
  }
  if (auto error = in.expectSameCount(0, 1))
    return std::move(error);
  return llvm::ArrayRef<int64_t>(permutation.data(), shape.size());
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_ELEMENTWISESHAPES_H
