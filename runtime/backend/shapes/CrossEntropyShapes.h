//===- CrossEntropyShapes.h - the losses' blocks ----------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/TiledLogits.h"

namespace twill {

/// The logits' columns: the whole vocab, or with `shard_axis` this rank's
/// block of a `vocab_size` vocab.
inline llvm::Expected<VocabBlock> vocabBlock(const InstructionView &in,
                                             int64_t columns) {
  auto position = shardAxis(in, in->cross_entropy().shard_axis());
  if (!position)
    return position.takeError();
  if (!*position)
    return VocabBlock::whole(columns);
  int64_t vocab = in->cross_entropy().vocab_size();
  if (vocab <= 0 || vocab > columns * (*position)->size)
    return in.fail("needs a vocab_size its blocks cover");
  return VocabBlock{columns, (*position)->coordinate * columns, vocab};
}

/// linear_cross_entropy's or its gradient's sizes, checked.
inline llvm::Expected<TiledLogits> tiledLogits(const InstructionView &in) {
  bool grad = in.opcode() == LINEAR_CROSS_ENTROPY_GRAD;
  DType type = in.floatType();
  llvm::Error shapes = grad
                           ? in.expect(4, 2, {type, type, I32, F32, type, type},
                                       {1, 2, 0, 0, 1, 2})
                           : in.expect(3, 3, {type, type, I32, F32, I64, type},
                                       {1, 2, 0, 0, 0, 2});
  if (shapes)
    return std::move(shapes);
  constexpr int tile = 5; // the last of six values either way
  int64_t columns = in.dim(1, 1), hidden = in.dim(1, 0);
  int64_t rows = in.count(2);
  if (in.dim(0, 0) != hidden || in.count(0) != rows * hidden ||
      in.dim(tile, 0) != columns || in.dim(tile, 1) < 1)
    return in.fail("input, weight, labels and tile do not agree");
  bool wrtWeight = grad && in->cross_entropy().wrt_weight();
  if (grad ? in.count(3) != 1 || in.count(4) != in.count(wrtWeight ? 1 : 0)
           : in.count(3) != 1 || in.count(4) != 1)
    return in.fail("the results do not agree with the operands");
  llvm::Expected<VocabBlock> block = vocabBlock(in, columns);
  if (!block)
    return block.takeError();
  return TiledLogits{
      rows,     hidden, in.dim(tile, 1), *block, int64_t(bytesPerElement(type)),
      wrtWeight};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H
