//===- CpuCollectives.cpp - the cpu backend's collectives -----------------===//

#include "runtime/backend/cpu/CpuCollectives.h"

#include "runtime/backend/cpu/CpuOps.h"
#include "runtime/backend/cpu/WideCopies.h"
#include "runtime/backend/shapes/CollectiveShape.h"
#include "runtime/executable/BFloat16.h"

#include <algorithm>
#include <vector>

using namespace twill;

/// Copies, for every index of the dims before `dim`, `length` slices of
/// `dim` from `from` (starting at slice `first` of `fromSize`) into the
/// start of `to` (`toSize` slices), zero-filling the rest of `to`; a slice
/// is `inner` elements of `T`.
template <typename T>
static void copyAlongDim(const T *from, int64_t fromSize, int64_t first, T *to,
                         int64_t toSize, int64_t length, int64_t outer,
                         int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    T *row = to + o * toSize * inner;
    std::fill(row, row + toSize * inner, T());
    if (length > 0)
      std::copy_n(from + (o * fromSize + first) * inner, length * inner, row);
  }
}

/// local_slice: this rank's block of a value every rank holds whole (no
/// communication).
llvm::Error cpu::runLocalSlice(const InstructionView &in) {
  llvm::Expected<CollectiveShape> shape = collectiveShape(in);
  if (!shape)
    return shape.takeError();
  int64_t whole = shape->whole, block = shape->block;
  int64_t first = std::min(whole, shape->coordinate * block);
  int64_t length = std::min(block, whole - first);
  if (shape->dtype == I32)
    copyAlongDim(in.data<int32_t>(0), whole, first, in.data<int32_t>(1), block,
                 length, shape->outer, shape->inner);
  else if (shape->dtype == U8)
    copyAlongDim(in.data<uint8_t>(0), whole, first, in.data<uint8_t>(1), block,
                 length, shape->outer, shape->inner);
  else
    copyAlongDim(in.data<float>(0), whole, first, in.data<float>(1), block,
                 length, shape->outer, shape->inner);
  return llvm::Error::success();
}

/// Starts the collective `in` describes. Blocks along a dim are
/// ceil(size / ranks) long: a gather drops the last block's padding when
/// it completes, a scatter pads with zeros first, so no size has to divide
/// by the axis.
static Communicator::Started startOn(const InstructionView &in,
                                     const CollectiveShape &shape) {
  Communicator &comm = *shape.comm;
  const std::string &axis = shape.axis;
  Opcode op = blockingOf(in.opcode());
  if (op == ALL_REDUCE)
    return shape.dtype == I64
               ? comm.startAllReduce(axis, in.data<int64_t>(0),
                                     in.data<int64_t>(1), in.count(0))
               : comm.startAllReduce(axis, in.data<float>(0), in.data<float>(1),
                                     in.count(0));
  if (op == ALL_TO_ALL)
    return comm.startAllToAll(axis, in.data<float>(0), in.data<float>(1),
                              in.shape(0), shape.splitDim, shape.dim);
  int64_t whole = shape.whole, block = shape.block, size = shape.size;
  int64_t outer = shape.outer, inner = shape.inner;
  const float *input = in.data<float>(0);
  float *output = in.data<float>(1);
  if (block * size == whole) // no padding: MPI reads and writes in place
    return op == ALL_GATHER ? comm.startAllGather(axis, input, output,
                                                  in.shape(0), shape.dim)
                            : comm.startReduceScatter(axis, input, output,
                                                      in.shape(0), shape.dim);
  // The padded whole: `size` blocks.
  llvm::SmallVector<int64_t> paddedShape(in.shape(0));
  paddedShape[shape.dim] = block * size;
  std::vector<float> padded(outer * block * size * inner);
  if (op == ALL_GATHER) {
    Communicator::Started started =
        comm.startAllGather(axis, input, padded.data(), in.shape(0), shape.dim);
    if (started) {
      (*started)->then([=, from = padded.data()] {
        copyAlongDim(from, block * size, 0, output, whole, whole, outer, inner);
      });
      (*started)->keep(std::move(padded));
    }
    return started;
  }
  copyAlongDim(input, whole, 0, padded.data(), block * size, whole, outer,
               inner);
  Communicator::Started started = comm.startReduceScatter(
      axis, padded.data(), output, paddedShape, shape.dim);
  if (started)
    (*started)->keep(std::move(padded));
  return started;
}

llvm::Error CpuCollectives::start(const Instruction &instruction) {
  // The kernel sees fp32 copies of bf16 values (and of bytes), which stay
  // with the collective until its wait rounds the result back.
  WideCopies wide(buffers, instruction, /*widenBytes=*/true);
  auto address = [&](int id) { return wide.address(id); };
  InstructionView in(buffers.executable(), instruction, address, comm,
                     /*widened=*/wide.any());
  llvm::Expected<CollectiveShape> shape = collectiveShape(in);
  if (!shape)
    return shape.takeError();
  int result = instruction.results(0);
  if (inFlight.count(result))
    return in.fail("its result is already in flight");
  Communicator::Started started = startOn(in, *shape);
  if (!started)
    return started.takeError();
  for (int id : wide.bf16.written)
    (*started)->then(
        [from = wide.values[id].data(), to = buffers.as<uint16_t>(id),
         count = wide.values[id].size()] { narrowToBF16(from, to, count); });
  for (int id : wide.bytesWritten)
    (*started)->then([from = wide.values[id].data(),
                      to = buffers.as<uint8_t>(id),
                      count = wide.values[id].size()] {
      WideCopies::narrowBytes(from, to, count);
    });
  for (auto &[id, values] : wide.values)
    (*started)->keep(std::move(values));
  inFlight[result] = std::move(*started);
  return llvm::Error::success();
}

llvm::Error CpuCollectives::wait(int result) {
  auto found = inFlight.find(result);
  if (found == inFlight.end()) // the loader refuses such a program
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "wait: nothing in flight writes buffer " +
                                       std::to_string(result));
  llvm::Error error = found->second->wait();
  inFlight.erase(found);
  return error;
}

llvm::Error CpuCollectives::progress() {
  // One MPI_Test on a collective not yet complete drives MPI's progress
  // engine, which moves every one on (Open MPI's libnbc advances all its
  // schedules at each call): testing the rest too would only add calls.
  for (auto &[result, pending] : inFlight) {
    llvm::Expected<bool> done = pending->progress();
    if (!done)
      return done.takeError();
    if (!*done)
      break;
  }
  return llvm::Error::success();
}
