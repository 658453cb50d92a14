//===- CrossEntropyShapes.h - the losses' blocks ----------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H
#define TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H

#include "opmodel/Shapes.h"
#include "runtime/backend/InstructionView.h"
#include "runtime/backend/TiledLogits.h"
#include "support/Dpo.h"

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

/// A loss op's dtypes: `operands`, the sums' gradient (F32) for a
/// gradient, its sequences (I32) where it has them, then `results`.
inline std::vector<DType> lossDTypes(std::vector<DType> operands, bool grad,
                                     bool bySequence,
                                     llvm::ArrayRef<DType> results) {
  if (grad)
    operands.push_back(F32);
  if (bySequence)
    operands.push_back(I32);
  operands.insert(operands.end(), results.begin(), results.end());
  return operands;
}

/// Checks a loss op's `sums` (its loss and count, or its gradient's
/// cotangent of them) against its labels (operand `labels`) and its
/// sequences (operand `sequences`, -1: none); returns where each
/// position's loss goes.
inline llvm::Expected<LossBuckets> lossBuckets(const InstructionView &in,
                                               int labels, int sequences,
                                               llvm::ArrayRef<int> sums) {
  int64_t count = in->cross_entropy().sequence_count();
  std::optional<shapes::Shape> sequenceShape;
  if (sequences >= 0)
    sequenceShape = in.shape(sequences);
  for (int index : sums)
    if (auto error = in.check(shapes::lossSums(in.shape(labels), sequenceShape,
                                               count, in.shape(index))))
      return std::move(error);
  if (sequences < 0)
    return LossBuckets();
  return LossBuckets{in.data<int32_t>(sequences), in.dim(labels, 0), count, 0};
}

/// cross_entropy's (logits, labels[, sequences] -> loss sums, token
/// counts) or cross_entropy_grad's (logits, labels, the sums' gradient[,
/// sequences] -> the logits') rows of logits, this rank's block of the
/// vocab in them, where each row's loss goes, and where the sums (the
/// loss's or their gradient) and the result are.
struct CrossEntropyShape {
  int64_t rows;
  VocabBlock block;
  LossBuckets buckets;
  int sums, result;
};

inline llvm::Expected<CrossEntropyShape>
crossEntropyShape(const InstructionView &in) {
  bool grad = in.opcode() == CROSS_ENTROPY_GRAD;
  DType type = in.floatType(); // the logits'
  bool bySequence = in.numOperands() == (grad ? 4 : 3);
  std::vector<DType> dtypes = lossDTypes({type, I32}, grad, bySequence,
                                         grad ? std::vector<DType>{type}
                                              : std::vector<DType>{F32, I64});
  int results = grad ? 1 : 2;
  if (auto error = in.expect(dtypes.size() - results, results, dtypes))
    return std::move(error);
  CrossEntropyShape s;
  s.sums = grad ? 2 : int(dtypes.size()) - 2;
  s.result = grad ? int(dtypes.size()) - 1 : s.sums;
  if (auto error =
          in.check(grad ? shapes::crossEntropyGrad(in.shape(0), in.shape(1),
                                                   in.shape(s.result))
                        : shapes::crossEntropy(in.shape(0), in.shape(1))))
    return std::move(error);
  llvm::Expected<LossBuckets> buckets = lossBuckets(
      in, 1, bySequence ? (grad ? 3 : 2) : -1,
      grad ? std::vector<int>{s.sums} : std::vector<int>{s.sums, s.sums + 1});
  if (!buckets)
    return buckets.takeError();
  llvm::Expected<VocabBlock> block = vocabBlock(in, in.dim(0, 0));
  if (!block)
    return block.takeError();
  s.rows = in.count(1);
  s.block = *block;
  s.buckets = *buckets;
  return s;
}

/// dpo_loss's (policy, reference, tokens -> loss sum, pairs, metric sums)
/// or dpo_loss_grad's (those and the loss sum's gradient -> the policy's)
/// pairs, and the loss's settings.
struct DpoShape {
  int64_t pairs;
  dpo::Settings settings;
};

inline llvm::Expected<DpoShape> dpoShape(const InstructionView &in) {
  bool grad = in.opcode() == DPO_LOSS_GRAD;
  if (auto error = grad ? in.expect(4, 1, {F32, F32, I64, F32, F32})
                        : in.expect(3, 3, {F32, F32, I64, F32, I64, F32}))
    return std::move(error);
  if (auto error = in.check(grad ? shapes::dpoLossGrad(in.shape(0), in.shape(1),
                                                       in.shape(2), in.shape(4))
                                 : shapes::dpoLoss(in.shape(0), in.shape(1),
                                                   in.shape(2), in.shape(5))))
    return std::move(error);
  if (in.count(3) != 1 || (!grad && in.count(4) != 1))
    return in.fail("the loss, its gradient and the pair count are scalars");
  const DpoLossAttributes &a = in->dpo_loss();
  dpo::Settings settings{dpo::LossType(int(a.loss_type())), a.beta(),
                         a.label_smoothing()};
  if (!(settings.beta > 0) ||
      !(settings.labelSmoothing >= 0 && settings.labelSmoothing < 0.5))
    return in.fail("needs a positive beta and label_smoothing in [0, 0.5)");
  return DpoShape{in.dim(0, 1), settings};
}

/// linear_cross_entropy's (input, weight, labels[, sequences] -> loss
/// sums, counts, tile) or its gradient's (input, weight, labels, the sums'
/// gradient[, sequences] -> the input's or the weight's, tile) GEMMs, where
/// each position's loss goes, and where the sums (or their gradient), the
/// gradient and the tile are; checked.
struct TiledLoss {
  TiledLogits logits;
  LossBuckets buckets;
  int sums, result, tile;
};

inline llvm::Expected<TiledLoss> tiledLoss(const InstructionView &in) {
  bool grad = in.opcode() == LINEAR_CROSS_ENTROPY_GRAD;
  DType type = in.floatType();
  bool bySequence = in.numOperands() == (grad ? 5 : 4);
  std::vector<DType> dtypes =
      lossDTypes({type, type, I32}, grad, bySequence,
                 grad ? std::vector<DType>{type, type}
                      : std::vector<DType>{F32, I64, type});
  int results = grad ? 2 : 3;
  if (auto error = in.expect(dtypes.size() - results, results, dtypes))
    return std::move(error);
  TiledLoss s;
  s.tile = int(dtypes.size()) - 1;
  s.sums = grad ? 3 : int(dtypes.size()) - 3;
  s.result = grad ? s.tile - 1 : s.sums;
  bool wrtWeight = grad && in->cross_entropy().wrt_weight();
  if (auto error =
          in.check(grad ? shapes::tiledLogitsGrad(in.shape(0), in.shape(1),
                                                  in.shape(2), in.shape(s.tile),
                                                  in.shape(s.result), wrtWeight)
                        : shapes::tiledLogits(in.shape(0), in.shape(1),
                                              in.shape(2), in.shape(s.tile))))
    return std::move(error);
  llvm::Expected<LossBuckets> buckets = lossBuckets(
      in, 2, bySequence ? (grad ? 4 : 3) : -1,
      grad ? std::vector<int>{s.sums} : std::vector<int>{s.sums, s.sums + 1});
  if (!buckets)
    return buckets.takeError();
  int64_t columns = in.dim(1, 1), hidden = in.dim(1, 0);
  int64_t rows = in.count(2);
  llvm::Expected<VocabBlock> block = vocabBlock(in, columns);
  if (!block)
    return block.takeError();
  double softcap = in->cross_entropy().softcap();
  if (!(softcap >= 0) || !std::isfinite(softcap))
    return in.fail("its softcap must be positive (or 0: none)");
  s.logits = TiledLogits{rows,
                         hidden,
                         in.dim(s.tile, 1),
                         *block,
                         int64_t(bytesPerElement(type)),
                         wrtWeight,
                         softcap};
  s.buckets = *buckets;
  return s;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_CROSSENTROPYSHAPES_H
