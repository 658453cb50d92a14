//===- AttentionShape.h - attention's sizes ---------------------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_ATTENTIONSHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_ATTENTIONSHAPE_H

#include "opmodel/Shapes.h"
#include "runtime/backend/InstructionView.h"

#include <cstdlib>

namespace twill {

/// The query heads of an attention op: all of them, or with `shard_axis`
/// this rank's block over every key/value head.
inline llvm::Expected<HeadBlock> headBlock(const InstructionView &in,
                                           int64_t heads, int64_t kvHeads) {
  auto position = shardAxis(in, in->attention().shard_axis());
  if (!position)
    return position.takeError();
  HeadBlock block = HeadBlock::whole(heads);
  if (*position)
    block = {heads, (*position)->coordinate * heads, heads * (*position)->size};
  if (kvHeads == 0 || block.total % kvHeads != 0)
    return in.fail("query heads are no multiple of key/value heads");
  return block;
}

/// Whether the gradient recomputes the softmax's log-sum-exp instead of
/// reading the forward's (TWILL_ATTENTION_STATISTICS=recompute): the
/// baseline kept statistics are checked and timed against, on either
/// backend. Read once.
inline llvm::Expected<bool> recomputesStatistics() {
  static const char *const value = std::getenv("TWILL_ATTENTION_STATISTICS");
  if (!value || llvm::StringRef(value) == "kept")
    return false;
  if (llvm::StringRef(value) == "recompute")
    return true;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::Twine("TWILL_ATTENTION_STATISTICS is '") + value +
          "': kept (the gradient reads the forward's log-sum-exp; the "
          "default) or recompute");
}

/// attention's or attention_grad's sizes: (query, key, value[, output,
/// log_sum_exp, grad][, segments]) -> (output, log_sum_exp) or (dq, dk,
/// dv); values [batch, seq, heads, headDim], the log-sum-exp [batch,
/// heads, seq] fp32.
struct AttentionShape {
  int64_t batch, seq, kvHeads, headDim;
  HeadBlock heads;
  int firstResult; // the operand count: results follow
  bool hasSegments;
  AttentionLogits logits;

  const int32_t *segments(const InstructionView &in) const {
    return hasSegments ? in.data<int32_t>(firstResult - 1) : nullptr;
  }
  /// Where the log-sum-exp is: attention's second result, attention_grad's
  /// fifth operand.
  float *logSumExp(const InstructionView &in, bool gradient) const {
    return in.data<float>(gradient ? kGradLogSumExp : firstResult + 1);
  }
  /// attention_grad's operands.
  static constexpr int kGradOutput = 3, kGradLogSumExp = 4, kGrad = 5;
};

inline llvm::Expected<AttentionShape> attentionShape(const InstructionView &in,
                                                     bool gradient) {
  using Shape = AttentionShape;
  int inputs = gradient ? 6 : 3, results = gradient ? 3 : 2;
  bool hasSegments = in.numOperands() == inputs + 1;
  DType type = in.floatType();
  llvm::SmallVector<DType, 10> dtypes(inputs, type);
  if (hasSegments)
    dtypes.push_back(I32);
  dtypes.append(results, type);
  int first = inputs + hasSegments;
  dtypes[gradient ? Shape::kGradLogSumExp : first + 1] = F32;
  if (auto error = in.expect(inputs + hasSegments, results, dtypes))
    return std::move(error);
  std::optional<llvm::ArrayRef<int64_t>> segments;
  if (hasSegments)
    segments = in.shape(inputs);
  bool sharded = !in->attention().shard_axis().empty();
  llvm::Error rule =
      gradient
          ? shapes::attentionGrad(
                in.shape(0), in.shape(1), in.shape(2),
                in.shape(Shape::kGradOutput), in.shape(Shape::kGradLogSumExp),
                in.shape(Shape::kGrad), segments, in.shape(first),
                in.shape(first + 1), in.shape(first + 2), sharded)
          : shapes::attention(in.shape(0), in.shape(1), in.shape(2), segments,
                              in.shape(first), in.shape(first + 1), sharded);
  if (auto error = in.check(std::move(rule)))
    return std::move(error);
  llvm::ArrayRef<int64_t> q = in.shape(0), k = in.shape(1);
  llvm::Expected<HeadBlock> heads = headBlock(in, q[2], k[2]);
  if (!heads)
    return heads.takeError();
  if (in->attention().window() < 0)
    return in.fail("window must be zero (none) or positive");
  if (!(in->attention().softcap() >= 0))
    return in.fail("softcap must be zero (none) or positive");
  return AttentionShape{q[0],
                        q[1],
                        k[2],
                        q[3],
                        *heads,
                        first,
                        hasSegments,
                        {in->attention().scale(), in->attention().window(),
                         in->attention().softcap()}};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_ATTENTIONSHAPE_H
