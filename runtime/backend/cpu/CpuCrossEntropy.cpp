//===- CpuCrossEntropy.cpp - the losses, vocab-parallel -------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/CrossEntropyShapes.h"

using namespace twill;

/// Row statistics summed (or maxed) over the `shard_axis` ranks.
static auto rowReduce(const InstructionView &in) {
  return [&in](std::vector<double> &rows, bool max) -> llvm::Error {
    const std::string &axis = in->cross_entropy().shard_axis();
    if (axis.empty())
      return llvm::Error::success();
    llvm::Expected<Communicator *> comm = in.communicator();
    if (!comm)
      return comm.takeError();
    return (*comm)->allReduce(axis, rows.data(), rows.size(), max);
  };
}

/// cross_entropy (logits, labels -> loss sum, count) and cross_entropy_grad
/// (logits, labels, loss grad -> the logits').
llvm::Error cpu::runCrossEntropyFamily(const InstructionView &in) {
  llvm::Expected<CrossEntropyShape> shape = crossEntropyShape(in);
  if (!shape)
    return shape.takeError();
  int64_t ignore = in->cross_entropy().ignore_index();
  if (in.opcode() == CROSS_ENTROPY_GRAD)
    return cpu::crossEntropyGrad(
        in.data<float>(0), in.data<int32_t>(1), shape->rows, shape->block,
        ignore, rowReduce(in), shape->buckets, in.data<float>(shape->sums),
        in.data<float>(shape->result));
  return cpu::crossEntropy(in.data<float>(0), in.data<int32_t>(1), shape->rows,
                           shape->block, ignore, rowReduce(in), shape->buckets,
                           in.data<float>(shape->sums),
                           in.data<int64_t>(shape->sums + 1));
}

/// linear_cross_entropy (input, weight, labels) -> (loss, count, tile) and
/// its gradient (input, weight, labels, loss grad) -> (grad, tile).
llvm::Error cpu::runLinearCrossEntropy(const InstructionView &in) {
  if (in.floatType() != F32)
    return in.fail("the cpu backend computes in fp32 only");
  llvm::Expected<TiledLoss> s = tiledLoss(in);
  if (!s)
    return s.takeError();
  int64_t ignore = in->cross_entropy().ignore_index();
  const float *input = in.data<float>(0), *weight = in.data<float>(1);
  const int32_t *labels = in.data<int32_t>(2);
  float *tile = in.data<float>(s->tile);
  if (in.opcode() == LINEAR_CROSS_ENTROPY_GRAD)
    return cpu::linearCrossEntropyGrad(
        input, weight, labels, s->logits, ignore, rowReduce(in), s->buckets,
        in.data<float>(s->sums), tile, in.data<float>(s->result));
  return cpu::linearCrossEntropy(
      input, weight, labels, s->logits, ignore, rowReduce(in), s->buckets, tile,
      in.data<float>(s->sums), in.data<int64_t>(s->sums + 1));
}

/// dpo_loss (policy, reference, tokens -> loss, pairs, metrics) and its
/// gradient (those, loss grad -> the policy's).
llvm::Error cpu::runDpoLoss(const InstructionView &in) {
  llvm::Expected<DpoShape> s = dpoShape(in);
  if (!s)
    return s.takeError();
  const float *policy = in.data<float>(0), *reference = in.data<float>(1);
  const int64_t *tokens = in.data<int64_t>(2);
  if (in.opcode() == DPO_LOSS)
    dpo::sumPairs(policy, reference, tokens, s->pairs, s->settings,
                  in.data<float>(3), in.data<int64_t>(4), in.data<float>(5));
  else
    for (int64_t i = 0; i < s->pairs; ++i)
      dpo::pairGradient(policy, reference, tokens, i, s->settings,
                        *in.data<float>(3), in.data<float>(4));
  return llvm::Error::success();
}
