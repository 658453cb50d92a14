//===- LayerShapes.h - embeddings and rope ----------------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_LAYERSHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_LAYERSHAPES_H

#include "runtime/backend/InstructionView.h"

namespace twill {

/// An embedding's sizes: (table [rows, dim], ids) -> [ids..., dim]; with
/// `shard_axis` the table holds rows [firstRow, firstRow + rows) of the
/// vocab (vocab-parallel), otherwise all of it.
struct EmbeddingShape {
  int64_t rows, dim;
  std::optional<int64_t> firstRow;
};

inline llvm::Expected<EmbeddingShape>
embeddingShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(2, 1, {type, I32, type}, {2, 0, 1}))
    return std::move(error);
  EmbeddingShape shape{in.shape(0)[0], in.dim(0, 0), std::nullopt};
  if (in.count(2) != in.count(1) * shape.dim)
    return in.fail("result size is not ids x hidden");
  auto position = shardAxis(in, in->embedding().shard_axis());
  if (!position)
    return position.takeError();
  if (*position)
    shape.firstRow = (*position)->coordinate * shape.rows;
  return shape;
}

/// rope's or rope_grad's sizes and frequencies' settings: (x, positions)
/// -> result, x [.., heads, headDim] with one position per token.
struct RopeShape {
  int64_t tokens, heads, headDim;
  double theta;
  RopeFrequencyScaling scaling;
};

inline llvm::Expected<RopeShape> ropeShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(2, 1, {type, I32, type}, {4, 2, 4}))
    return std::move(error);
  RopeShape shape;
  shape.headDim = in.dim(0, 0);
  shape.heads = in.dim(0, 1);
  shape.tokens =
      in.count(0) / std::max<int64_t>(shape.heads * shape.headDim, 1);
  if (in.count(1) != shape.tokens)
    return in.fail("positions do not match the tokens");
  if (auto error = in.expectSameCount(0, 2))
    return std::move(error);
  const RopeAttributes &rope = in->rope();
  shape.theta = rope.theta();
  shape.scaling.factor = rope.scaling_factor();
  shape.scaling.lowFreqFactor = rope.low_freq_factor();
  shape.scaling.highFreqFactor = rope.high_freq_factor();
  shape.scaling.originalMaxPosition = rope.original_max_position();
  return shape;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_LAYERSHAPES_H
