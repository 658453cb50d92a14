//===- LayerShapes.h - embeddings, norms and rope ---------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_LAYERSHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_LAYERSHAPES_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/shapes/ShapeRule.h"

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
  if (auto error = in.expect(2, 1, {type, I32, type}))
    return std::move(error);
  if (auto error = checkShapeRule(in))
    return std::move(error);
  EmbeddingShape shape{in.shape(0)[0], in.dim(0, 0), std::nullopt};
  auto position = shardAxis(in, in->embedding().shard_axis());
  if (!position)
    return position.takeError();
  if (*position)
    shape.firstRow = (*position)->coordinate * shape.rows;
  return shape;
}

/// embedding_grad's sizes: (ids, grad [ids..., dim]) -> the table's
/// gradient [rows, dim], in fp32 (rows that many ids add into).
struct EmbeddingGradShape {
  int64_t rows, dim;
};

inline llvm::Expected<EmbeddingGradShape>
embeddingGradShape(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {I32, F32, F32}))
    return std::move(error);
  if (auto error = checkShapeRule(in))
    return std::move(error);
  return EmbeddingGradShape{in.shape(2)[0], in.dim(2, 0)};
}

/// rms_norm (input, weight), rms_norm_grad (input, weight, grad) and
/// rms_norm_weight_grad (input, grad): `rows` rows of `dim`, every value of
/// one float type.
struct RmsNormShape {
  int64_t rows, dim;
  double epsilon;
};

inline llvm::Expected<RmsNormShape> rmsNormShape(const InstructionView &in) {
  if (auto error = checkShapeRule(in))
    return std::move(error);
  if (auto error = in.expect(in.numOperands(), 1, in.floatType()))
    return std::move(error);
  int64_t dim = in.dim(0, 0);
  return RmsNormShape{in.count(0) / std::max<int64_t>(dim, 1), dim,
                      in->rms_norm().epsilon()};
}

/// rope's or rope_grad's sizes and frequencies' settings: (x [batch, seq,
/// heads, headDim], positions [batch, seq]) -> like x.
struct RopeShape {
  int64_t tokens, heads, headDim;
  double theta;
  RopeFrequencyScaling scaling;
};

inline llvm::Expected<RopeShape> ropeShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(2, 1, {type, I32, type}))
    return std::move(error);
  if (auto error = checkShapeRule(in))
    return std::move(error);
  RopeShape shape;
  shape.headDim = in.dim(0, 0);
  shape.heads = in.dim(0, 1);
  shape.tokens = in.count(1);
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
