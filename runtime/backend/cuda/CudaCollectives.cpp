//===- CudaCollectives.cpp - the collectives through NCCL -----------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/shapes/CollectiveShape.h"

using namespace twill;

namespace {

/// Elements of `shape` before and after dim `dim`.
std::pair<int64_t, int64_t> around(llvm::ArrayRef<int64_t> shape, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
    (d < dim ? outer : inner) *= d == dim ? 1 : shape[d];
  return {outer, inner};
}

/// NCCL's name for a dtype collectives move (bf16 is summed as bf16, as
/// PyTorch's FSDP and Megatron do).
ncclDataType_t ncclTypeOf(DType dtype) {
  switch (dtype) {
  case BF16:
    return ncclBfloat16;
  case I64:
    return ncclInt64;
  case I32:
    return ncclInt32;
  case U8:
    return ncclUint8;
  default:
    return ncclFloat32;
  }
}

/// all_to_all: block r of the split dim goes to rank r, and the blocks that
/// arrive are concatenated along the other dim; grouped NCCL sends and
/// receives between two rearrangements, through staging slot `slot`.
llvm::Error launchAllToAll(const InstructionView &in,
                           const CollectiveShape &shape, NcclComm &nccl,
                           ncclComm_t comm, Device &device, size_t slot) {
  llvm::ArrayRef<int64_t> inShape = in.shape(0);
  int64_t ranks = shape.size, split = shape.splitDim, concat = shape.dim;
  if (inShape[split] % ranks != 0)
    return in.fail("its split dim does not divide over the axis");
  std::vector<int64_t> blockShape(inShape);
  blockShape[split] /= ranks;
  int64_t block = in.count(0) / ranks;
  size_t element = bytesPerElement(shape.dtype);
  llvm::Expected<void *> space =
      device.space(device.flightStaging, slot, 2 * in.count(0) * element);
  if (!space)
    return space.takeError();
  char *send = static_cast<char *>(*space);
  char *receive = send + in.count(0) * element;
  auto [splitOuter, splitInner] = around(inShape, split);
  cuda::arrangeBlocks(in.data<void>(0), send, ranks, splitOuter,
                      blockShape[split], inShape[split], splitInner,
                      /*toWhole=*/false, element, device.stream);
  return device.launch(
      in.bufferId(1), slot, [&](cudaStream_t stream) -> llvm::Error {
        if (auto error = checkNccl(ncclGroupStart(), "ncclGroupStart"))
          return error;
        ncclResult_t result = ncclSuccess;
        for (int64_t r = 0; r < ranks && result == ncclSuccess; ++r) {
          result = ncclSend(send + r * block * element, block,
                            ncclTypeOf(shape.dtype), int(r), comm, stream);
          if (result == ncclSuccess)
            result = ncclRecv(receive + r * block * element, block,
                              ncclTypeOf(shape.dtype), int(r), comm, stream);
        }
        // The group is closed whatever happened inside it.
        ncclResult_t ended = ncclGroupEnd();
        if (auto error = checkNccl(result, "ncclSend/ncclRecv")) {
          (void)ended;
          return error;
        }
        if (auto error = nccl.settle(comm, ended, "ncclGroupEnd"))
          return error;
        auto [concatOuter, concatInner] = around(blockShape, concat);
        cuda::arrangeBlocks(receive, in.data<void>(1), ranks, concatOuter,
                            blockShape[concat], ranks * blockShape[concat],
                            concatInner, /*toWhole=*/true, element, stream);
        return llvm::Error::success();
      });
}

} // namespace

/// The collectives, through NCCL on the communication stream: NCCL moves
/// whole buffers, so a gather or scatter along a dim other than the first
/// rearranges blocks through staging memory of the collective's own.
llvm::Error cuda::runCollective(const InstructionView &in, Device &device) {
  llvm::Expected<CollectiveShape> shape = collectiveShape(in);
  if (!shape)
    return shape.takeError();
  Opcode op = blockingOf(in.opcode());
  int64_t whole = shape->whole, block = shape->block, size = shape->size;
  int64_t outer = shape->outer, inner = shape->inner;
  if (op == LOCAL_SLICE) {
    int64_t first = std::min(whole, shape->coordinate * block);
    size_t element = bytesPerElement(shape->dtype);
    cuda::copyAlongDim(in.data<void>(0), whole, first, in.data<void>(1), block,
                       std::min(block, whole - first), outer, inner * element,
                       device.stream);
    return llvm::Error::success();
  }
  llvm::Expected<NcclComm *> nccl = device.nccl();
  if (!nccl)
    return in.fail(llvm::toString(nccl.takeError()));
  // An all-reduce sums over the ranks present; the rest need all of them.
  llvm::Expected<ncclComm_t> comm = op == ALL_REDUCE
                                        ? (*nccl)->axis(shape->axis)
                                        : (*nccl)->wholeAxis(shape->axis, size);
  if (!comm)
    return in.fail(llvm::toString(comm.takeError()));
  int result = in.bufferId(1);
  size_t slot = device.freeFlightSlot();
  if (auto error = [&]() -> llvm::Error {
        if (op == ALL_REDUCE)
          return device.launch(result, slot, [&](cudaStream_t stream) {
            return (*nccl)->settle(
                *comm,
                ncclAllReduce(in.data<void>(0), in.data<void>(1), in.count(0),
                              ncclTypeOf(shape->dtype), ncclSum, *comm, stream),
                "ncclAllReduce");
          });
        if (op == ALL_TO_ALL)
          return launchAllToAll(in, *shape, **nccl, *comm, device, slot);
        int64_t blocked = size * outer * block * inner;
        int element = int(bytesPerElement(shape->dtype));
        ncclDataType_t type = ncclTypeOf(shape->dtype);
        llvm::Expected<void *> space =
            device.space(device.flightStaging, slot,
                         blocked * bytesPerElement(shape->dtype));
        if (!space)
          return space.takeError();
        void *padded = *space;
        if (op == ALL_GATHER)
          return device.launch(
              result, slot, [&](cudaStream_t stream) -> llvm::Error {
                if (auto error =
                        (*nccl)->settle(*comm,
                                        ncclAllGather(in.data<void>(0), padded,
                                                      outer * block * inner,
                                                      type, *comm, stream),
                                        "ncclAllGather"))
                  return error;
                cuda::arrangeBlocks(padded, in.data<void>(1), size, outer,
                                    block, whole, inner, /*toWhole=*/true,
                                    element, stream);
                return llvm::Error::success();
              });
        cuda::arrangeBlocks(in.data<void>(0), padded, size, outer, block, whole,
                            inner, /*toWhole=*/false, element, device.stream);
        return device.launch(result, slot, [&](cudaStream_t stream) {
          return (*nccl)->settle(*comm,
                                 ncclReduceScatter(padded, in.data<void>(1),
                                                   outer * block * inner, type,
                                                   ncclSum, *comm, stream),
                                 "ncclReduceScatter");
        });
      }())
    return error;
  return isStart(in.opcode()) ? llvm::Error::success() : device.land(result);
}

llvm::Error cuda::runWait(const InstructionView &in, Device &device) {
  if (in.numOperands() != 1 || in.numResults() != 0)
    return in.fail("needs one result in flight");
  return device.land(in.bufferId(0));
}
