//===- CudaCrossEntropy.cpp - the vocab-parallel loss ---------------------===//
//
// The loss and its gradient over this rank's block of the vocab: row
// statistics all-reduced over the axis that splits it between kernels
// (CudaCrossEntropyKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaKernels.h"

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
                                         max ? ncclMax : ncclSum, *comm, stream),
                           "ncclAllReduce");
  });
}

} // namespace

/// cross_entropy (logits, labels) -> (loss, count) and cross_entropy_grad
/// (logits, labels, loss grad) -> dlogits.
llvm::Error cuda::runCrossEntropyFamily(const InstructionView &in,
                                         Device &device) {
  bool grad = in.opcode() == CROSS_ENTROPY_GRAD;
  DType type = in.floatType(); // the logits', read as stored
  bool bf16 = type == BF16;
  llvm::Error shapes =
      grad ? in.expect(3, 1, {type, I32, F32, type}, {1, 0, 0, 1})
           : in.expect(2, 2, {type, I32, F32, I64}, {1, 0, 0, 0});
  if (shapes)
    return shapes;
  int64_t columns = in.dim(0, 0), rows = in.count(1);
  if (rows * columns != in.count(0) || in.count(2) != 1 ||
      in.count(3) != (grad ? in.count(0) : 1))
    return in.fail("logits, labels and results do not agree");
  llvm::Expected<VocabBlock> block = vocabBlock(in, columns);
  if (!block)
    return block.takeError();
  int64_t ignore = in->cross_entropy().ignore_index();
  llvm::Expected<void *> space =
      device.scratchSpace(0, 3 * std::max<int64_t>(rows, 1) * sizeof(double));
  if (!space)
    return space.takeError();
  double *max = static_cast<double *>(*space), *sum = max + rows,
         *target = sum + rows;
  const void *logits = in.data<void>(0);
  const int32_t *labels = in.data<int32_t>(1);
  cuda::softmaxMaxAndTarget(logits, labels, rows, *block, ignore, max, target,
                            device.errors, bf16, device.stream);
  if (auto error = reduceRows(in, device, max, rows, true))
    return error;
  cuda::softmaxSum(logits, rows, *block, max, sum, bf16, device.stream);
  if (auto error = reduceRows(in, device, sum, rows, false))
    return error;
  if (grad) {
    cuda::crossEntropyGrad(logits, labels, rows, *block, ignore, max, sum,
                           in.data<float>(2), in.data<void>(3), bf16,
                           device.stream);
    return llvm::Error::success();
  }
  if (auto error = reduceRows(in, device, target, rows, false))
    return error;
  cuda::crossEntropyLoss(labels, rows, ignore, max, sum, target,
                         in.data<float>(2), in.data<int64_t>(3), device.stream);
  return llvm::Error::success();
}
