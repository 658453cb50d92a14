//===- CudaCrossEntropy.cpp - the vocab-parallel loss ---------------------===//
//
// The loss and its gradient over this rank's block of the vocab: row
// statistics all-reduced over the axis that splits it between kernels
// (CudaCrossEntropyKernels.cu). linear_cross_entropy runs the same kernels
// on one tile of logits at a time, formed by a GEMM (TiledLogits.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/shapes/CrossEntropyShapes.h"

using namespace twill;

namespace {

/// Sums per row of a vocab-parallel loss over the axis that splits it.
llvm::Error reduceRows(const InstructionView &in, Device &device, double *rows,
                       int64_t count, bool max) {
  const std::string &axis = in->cross_entropy().shard_axis();
  if (axis.empty())
    return llvm::Error::success();
  llvm::Expected<NcclComm *> nccl = device.nccl();
  if (!nccl)
    return in.fail("its shard_axis " + llvm::toString(nccl.takeError()));
  llvm::Expected<ncclComm_t> comm = (*nccl)->axis(axis);
  if (!comm)
    return comm.takeError();
  return device.communicate([&](cudaStream_t stream) {
    return (*nccl)->settle(*comm,
                           ncclAllReduce(rows, rows, count, ncclDouble,
                                         max ? ncclMax : ncclSum, *comm,
                                         stream),
                           "ncclAllReduce");
  });
}

/// Each row's max and sum of exp(logit - max) over every rank's block, and
/// the label's logit (not yet reduced), into `max`, `sum` and `target`.
llvm::Error rowStats(const InstructionView &in, Device &device,
                     const void *logits, const int32_t *labels, int64_t rows,
                     VocabBlock block, double *max, double *sum,
                     double *target) {
  bool bf16 = in.floatType() == BF16;
  int64_t ignore = in->cross_entropy().ignore_index();
  cuda::softmaxMaxAndTarget(logits, labels, rows, block, ignore, max, target,
                            device.errors, bf16, device.stream);
  if (auto error = reduceRows(in, device, max, rows, true))
    return error;
  cuda::softmaxSum(logits, rows, block, max, sum, bf16, device.stream);
  return reduceRows(in, device, sum, rows, false);
}

/// Device scratch for three fp64 statistics of `rows` rows.
llvm::Expected<std::array<double *, 3>> statsSpace(Device &device,
                                                   int64_t rows) {
  llvm::Expected<void *> space =
      device.scratchSpace(0, 3 * std::max<int64_t>(rows, 1) * sizeof(double));
  if (!space)
    return space.takeError();
  auto *max = static_cast<double *>(*space);
  return std::array<double *, 3>{max, max + rows, max + 2 * rows};
}

} // namespace

/// cross_entropy (logits, labels) -> (loss, count) and cross_entropy_grad
/// (logits, labels, loss grad) -> dlogits.
llvm::Error cuda::runCrossEntropyFamily(const InstructionView &in,
                                        Device &device) {
  bool grad = in.opcode() == CROSS_ENTROPY_GRAD;
  bool bf16 = in.floatType() == BF16; // the logits', read as stored
  llvm::Expected<CrossEntropyShape> shape = crossEntropyShape(in);
  if (!shape)
    return shape.takeError();
  int64_t rows = shape->rows;
  const VocabBlock &block = shape->block;
  int64_t ignore = in->cross_entropy().ignore_index();
  llvm::Expected<std::array<double *, 3>> stats = statsSpace(device, rows);
  if (!stats)
    return stats.takeError();
  auto [max, sum, target] = *stats;
  const void *logits = in.data<void>(0);
  const int32_t *labels = in.data<int32_t>(1);
  if (auto error =
          rowStats(in, device, logits, labels, rows, block, max, sum, target))
    return error;
  if (grad) {
    cuda::crossEntropyGrad(logits, labels, rows, block, ignore, max, sum,
                           in.data<float>(shape->sums), shape->buckets,
                           /*softcap=*/0, in.data<void>(shape->result), bf16,
                           device.stream);
    return llvm::Error::success();
  }
  if (auto error = reduceRows(in, device, target, rows, false))
    return error;
  cuda::crossEntropyLoss(labels, rows, ignore, max, sum, target, shape->buckets,
                         in.data<float>(shape->sums),
                         in.data<int64_t>(shape->sums + 1), device.stream);
  return llvm::Error::success();
}

/// linear_cross_entropy (input, weight, labels[, sequences]) -> (loss
/// sums, counts, tile) and its gradient (input, weight, labels, the sums'
/// grad[, sequences]) -> (grad, tile): per tile of rows, the logits' GEMM
/// into the tile and the loss kernels on it; the gradient's tile becomes
/// the logits' gradient in place and is multiplied out. Per row the
/// statistics are the untiled op's.
llvm::Error cuda::runLinearCrossEntropy(const InstructionView &in,
                                        Device &device) {
  llvm::Expected<TiledLoss> loss = tiledLoss(in);
  if (!loss)
    return loss.takeError();
  const TiledLogits *shape = &loss->logits;
  bool grad = in.opcode() == LINEAR_CROSS_ENTROPY_GRAD;
  DType type = in.floatType();
  bool bf16 = type == BF16;
  int64_t rows = shape->rows, ignore = in->cross_entropy().ignore_index();
  llvm::Expected<std::array<double *, 3>> stats = statsSpace(device, rows);
  if (!stats)
    return stats.takeError();
  auto [max, sum, target] = *stats;
  const void *input = in.data<void>(0), *weight = in.data<void>(1);
  const int32_t *labels = in.data<int32_t>(2);
  void *tile = in.data<void>(loss->tile);
  void *out = grad ? in.data<void>(loss->result) : nullptr;
  if (grad && shape->wrtWeight && rows == 0)
    return checkCuda(
        cudaMemsetAsync(out, 0, in.count(loss->result) * bytesPerElement(type),
                        device.stream),
        "cudaMemsetAsync");
  for (int64_t first = 0; first < rows; first += shape->tileRows) {
    int64_t count = std::min(shape->tileRows, rows - first);
    if (auto error = cuda::gemm(
            device, shape->logits(input, weight, tile, first, count), type))
      return in.fail(llvm::toString(std::move(error)));
    if (shape->softcap > 0)
      cuda::softcap(tile, /*grad=*/nullptr, shape->softcap, tile,
                    count * shape->block.columns, bf16, device.stream);
    if (auto error =
            rowStats(in, device, tile, labels + first, count, shape->block,
                     max + first, sum + first, target + first))
      return error;
    if (!grad)
      continue;
    cuda::crossEntropyGrad(tile, labels + first, count, shape->block, ignore,
                           max + first, sum + first, in.data<float>(loss->sums),
                           loss->buckets.from(first), shape->softcap, tile,
                           bf16, device.stream);
    RowMajorGemm product =
        shape->wrtWeight ? shape->weightGrad(tile, input, out, first, count)
                         : shape->inputGrad(tile, weight, out, first, count);
    if (auto error = cuda::gemm(device, product, type))
      return in.fail(llvm::toString(std::move(error)));
  }
  if (grad)
    return llvm::Error::success();
  if (auto error = reduceRows(in, device, target, rows, false))
    return error;
  cuda::crossEntropyLoss(labels, rows, ignore, max, sum, target, loss->buckets,
                         in.data<float>(loss->sums),
                         in.data<int64_t>(loss->sums + 1), device.stream);
  return llvm::Error::success();
}

/// dpo_loss and its gradient (support/Dpo.h's arithmetic, as on the cpu).
llvm::Error cuda::runDpoLoss(const InstructionView &in, Device &device) {
  llvm::Expected<DpoShape> s = dpoShape(in);
  if (!s)
    return s.takeError();
  const float *policy = in.data<float>(0), *reference = in.data<float>(1);
  const int64_t *tokens = in.data<int64_t>(2);
  if (in.opcode() == DPO_LOSS)
    cuda::dpoLoss(policy, reference, tokens, s->pairs, s->settings,
                  in.data<float>(3), in.data<int64_t>(4), in.data<float>(5),
                  device.stream);
  else
    cuda::dpoLossGrad(policy, reference, tokens, s->pairs, s->settings,
                      in.data<float>(3), in.data<float>(4), device.stream);
  return llvm::Error::success();
}
