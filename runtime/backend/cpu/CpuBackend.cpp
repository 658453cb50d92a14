//===- CpuBackend.cpp - runs an Executable on the CPU ---------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cpu/CpuCollectives.h"
#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/cpu/WideCopies.h"
#include "runtime/executable/BFloat16.h"
#include "runtime/executable/Opcodes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <omp.h>
#include <sys/resource.h>

#include <cstring>
#include <sched.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace twill;

namespace {

using Kernel = llvm::Error (*)(const InstructionView &);

llvm::Error runEmbedding(const InstructionView &in) {
  llvm::Expected<EmbeddingShape> shape = embeddingShape(in);
  if (!shape)
    return shape.takeError();
  return cpu::embedding(in.data<float>(0), shape->rows, shape->dim,
                        in.data<int32_t>(1), in.count(1), in.data<float>(2),
                        shape->firstRow);
}

llvm::Error runMatmul(const InstructionView &in) {
  llvm::Expected<MatmulShape> shape = matmulShape(in);
  if (!shape)
    return shape.takeError();
  float *out = in.data<float>(shape->result);
  if (shape->hasAddend)
    cpu::copy(in.data<float>(2), out, in.count(2));
  cpu::gemm(matmulGemm(*shape, in.data<float>(0), in.data<float>(1), out));
  return llvm::Error::success();
}

llvm::Error runRmsNorm(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, F32, F32}, {1, 1, 1}))
    return error;
  int64_t dim = in.dim(0, 0);
  if (in.count(1) != dim)
    return in.fail("weight size differs from the last dim");
  if (auto error = in.expectSameCount(0, 2))
    return error;
  cpu::rmsNorm(in.data<float>(0), in.data<float>(1), in.data<float>(2),
               in.count(0) / std::max<int64_t>(dim, 1), dim,
               in->rms_norm().epsilon());
  return llvm::Error::success();
}

/// rope and rope_grad: the same rotation, forwards or backwards.
template <bool Inverse> llvm::Error runRope(const InstructionView &in) {
  llvm::Expected<RopeShape> shape = ropeShape(in);
  if (!shape)
    return shape.takeError();
  cpu::rope(in.data<float>(0), in.data<int32_t>(1), in.data<float>(2),
            shape->tokens, shape->heads, shape->headDim, shape->theta,
            shape->scaling, Inverse);
  return llvm::Error::success();
}

llvm::Error runAttention(const InstructionView &in) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, false);
  if (!shape)
    return shape.takeError();
  cpu::attention(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                 shape->segments(in), in.data<float>(shape->firstResult),
                 shape->batch, shape->seq, shape->heads, shape->kvHeads,
                 shape->headDim, shape->scale);
  return llvm::Error::success();
}

template <void (*Compute)(const float *, const float *, float *, int64_t)>
llvm::Error runElementwise(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, F32, F32}, {0, 0, 0}))
    return error;
  if (auto error = in.expectSameCount(0, 1))
    return error;
  if (auto error = in.expectSameCount(0, 2))
    return error;
  Compute(in.data<float>(0), in.data<float>(1), in.data<float>(2), in.count(0));
  return llvm::Error::success();
}

llvm::Error runScale(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (auto error = in.expectSameCount(0, 1))
    return error;
  cpu::scale(in.data<float>(0), in->scale().factor(), in.data<float>(1),
             in.count(0));
  return llvm::Error::success();
}

/// row_sum_squares; scale_columns (input, scale -> result) and its gradient
/// (input, scale, grad -> the input's, the scale's).
llvm::Error runColumns(const InstructionView &in) {
  llvm::Expected<ColumnsShape> shape = columnsShape(in);
  if (!shape)
    return shape.takeError();
  auto [rows, columns] = *shape;
  if (in.opcode() == ROW_SUM_SQUARES)
    cpu::rowSumSquares(in.data<float>(0), rows, columns, in.data<float>(1));
  else if (in.opcode() == SCALE_COLUMNS)
    cpu::scaleColumns(in.data<float>(0), in.data<float>(1), rows, columns,
                      in.data<float>(2));
  else
    cpu::scaleColumnsGrad(in.data<float>(0), in.data<float>(1),
                          in.data<float>(2), rows, columns, in.data<float>(3),
                          in.data<float>(4));
  return llvm::Error::success();
}

llvm::Error runDropout(const InstructionView &in) {
  llvm::Expected<DropoutShape> shape = dropoutShape(in);
  if (!shape)
    return shape.takeError();
  shape->key.microBatch = uint64_t(*in.data<int64_t>(2));
  cpu::dropout(in.data<float>(0), in.data<int32_t>(1), shape->tokens,
               shape->features, shape->firstFeature, shape->key,
               in->dropout().rate(), in.data<float>(3));
  return llvm::Error::success();
}

/// Row statistics summed (or maxed) over the `shard_axis` ranks.
auto rowReduce(const InstructionView &in) {
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

llvm::Error runCrossEntropy(const InstructionView &in) {
  if (auto error = in.expect(2, 2, {F32, I32, F32, I64}, {1, 0, 0, 0}))
    return error;
  int64_t vocab = in.dim(0, 0);
  if (in.count(1) * vocab != in.count(0) || in.count(2) != 1 ||
      in.count(3) != 1)
    return in.fail("logits, labels and results do not agree");
  llvm::Expected<VocabBlock> block = vocabBlock(in, vocab);
  if (!block)
    return block.takeError();
  return cpu::crossEntropy(in.data<float>(0), in.data<int32_t>(1), in.count(1),
                           *block, in->cross_entropy().ignore_index(),
                           rowReduce(in), in.data<float>(2),
                           in.data<int64_t>(3));
}

/// linear_cross_entropy (input, weight, labels) -> (loss, count, tile) and
/// its gradient (input, weight, labels, loss grad) -> (grad, tile).
llvm::Error runLinearCrossEntropy(const InstructionView &in) {
  if (in.floatType() != F32)
    return in.fail("the cpu backend computes in fp32 only");
  llvm::Expected<TiledLogits> shape = tiledLogits(in);
  if (!shape)
    return shape.takeError();
  int64_t ignore = in->cross_entropy().ignore_index();
  const float *input = in.data<float>(0), *weight = in.data<float>(1);
  const int32_t *labels = in.data<int32_t>(2);
  if (in.opcode() == LINEAR_CROSS_ENTROPY_GRAD)
    return cpu::linearCrossEntropyGrad(input, weight, labels, *shape, ignore,
                                       rowReduce(in), *in.data<float>(3),
                                       in.data<float>(5), in.data<float>(4));
  return cpu::linearCrossEntropy(input, weight, labels, *shape, ignore,
                                 rowReduce(in), in.data<float>(5),
                                 in.data<float>(3), in.data<int64_t>(4));
}

/// offload and reload: the value copied between the arenas, as it is.
llvm::Error runTransfer(const InstructionView &in) {
  if (in.numOperands() != 1 || in.numResults() != 1 ||
      in.dtype(0) != in.dtype(1) || in.count(0) != in.count(1))
    return in.fail("copies one value into one of its dtype and size");
  std::memcpy(in.data<std::byte>(1), in.data<std::byte>(0),
              in.count(0) * bytesPerElement(in.dtype(0)));
  return llvm::Error::success();
}

/// split and concat: each piece's rows copied out of or into the whole's.
llvm::Error runPieces(const InstructionView &in) {
  llvm::Expected<PiecesShape> shape = piecesShape(in);
  if (!shape)
    return shape.takeError();
  bool split = in.opcode() == SPLIT;
  auto *whole = in.data<std::byte>(shape->whole);
  for (const PieceCopy &copy : shape->pieces) {
    auto *piece = in.data<std::byte>(copy.piece);
    for (int64_t row = 0; row < copy.rows; ++row) {
      std::byte *inWhole = whole + row * copy.wholePitch + copy.offset;
      std::byte *inPiece = piece + row * copy.piecePitch + copy.pieceOffset;
      std::memcpy(split ? inPiece : inWhole, split ? inWhole : inPiece,
                  copy.bytes);
    }
  }
  return llvm::Error::success();
}

llvm::Error runReshape(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (auto error = in.expectSameCount(0, 1))
    return error;
  cpu::copy(in.data<float>(0), in.data<float>(1), in.count(0));
  return llvm::Error::success();
}

llvm::Error runTranspose(const InstructionView &in) {
  llvm::Expected<llvm::ArrayRef<int64_t>> permutation =
      transposePermutation(in);
  if (!permutation)
    return permutation.takeError();
  cpu::transpose(in.data<float>(0), in.shape(0).data(), permutation->data(),
                 in.shape(0).size(), in.data<float>(1));
  return llvm::Error::success();
}

llvm::Error runCast(const InstructionView &in) {
  DType from = in.dtype(0);
  if (in.dtype(1) != F32 || (from != F32 && from != I32 && from != I64))
    return in.fail("the cpu backend casts floats, i32 and i64 to floats only");
  if (auto error = in.expectSameCount(0, 1))
    return error;
  float *out = in.data<float>(1);
  for (int64_t i = 0; i < in.count(0); ++i)
    out[i] = from == F32   ? in.data<float>(0)[i]
             : from == I32 ? float(in.data<int32_t>(0)[i])
                           : float(in.data<int64_t>(0)[i]);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

llvm::Error runConstant(const InstructionView &in) {
  if (auto error = in.expect(0, 1, {F32}, {0}))
    return error;
  cpu::fill(in.data<float>(0), in.count(0), in->constant().value());
  return llvm::Error::success();
}

llvm::Error runEmbeddingGrad(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {I32, F32, F32}, {0, 1, 2}))
    return error;
  int64_t dim = in.dim(2, 0);
  if (in.count(1) != in.count(0) * dim)
    return in.fail("grad size is not ids x hidden");
  return cpu::embeddingGrad(in.data<int32_t>(0), in.count(0), in.data<float>(1),
                            in.shape(2)[0], dim, in.data<float>(2));
}

llvm::Error runRmsNormGrad(const InstructionView &in) {
  if (auto error = in.expect(3, 1, {F32, F32, F32, F32}, {1, 1, 1, 1}))
    return error;
  int64_t dim = in.dim(0, 0);
  if (in.count(1) != dim || in.count(2) != in.count(0) ||
      in.count(3) != in.count(0))
    return in.fail("input, weight, grad and result do not agree");
  cpu::rmsNormGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                   in.data<float>(3), in.count(0) / std::max<int64_t>(dim, 1),
                   dim, in->rms_norm().epsilon());
  return llvm::Error::success();
}

llvm::Error runRmsNormWeightGrad(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, F32, F32}, {1, 1, 1}))
    return error;
  int64_t dim = in.dim(0, 0);
  if (in.count(1) != in.count(0) || in.count(2) != dim)
    return in.fail("input, grad and result do not agree");
  cpu::rmsNormWeightGrad(
      in.data<float>(0), in.data<float>(1), in.data<float>(2),
      in.count(0) / std::max<int64_t>(dim, 1), dim, in->rms_norm().epsilon());
  return llvm::Error::success();
}

llvm::Error runAttentionGrad(const InstructionView &in) {
  llvm::Expected<AttentionShape> shape = attentionShape(in, true);
  if (!shape)
    return shape.takeError();
  int first = shape->firstResult;
  cpu::attentionGrad(
      in.data<float>(0), in.data<float>(1), in.data<float>(2),
      in.data<float>(4), shape->segments(in), in.data<float>(first),
      in.data<float>(first + 1), in.data<float>(first + 2), shape->batch,
      shape->seq, shape->heads, shape->kvHeads, shape->headDim, shape->scale);
  return llvm::Error::success();
}

llvm::Error runSwigluGrad(const InstructionView &in) {
  if (auto error = in.expect(3, 2, {F32, F32, F32, F32, F32}, {0, 0, 0, 0, 0}))
    return error;
  for (int index = 1; index < 5; ++index)
    if (auto error = in.expectSameCount(0, index))
      return error;
  cpu::swigluGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                  in.data<float>(3), in.data<float>(4), in.count(0));
  return llvm::Error::success();
}

llvm::Error runCrossEntropyGrad(const InstructionView &in) {
  if (auto error = in.expect(3, 1, {F32, I32, F32, F32}, {1, 0, 0, 1}))
    return error;
  int64_t vocab = in.dim(0, 0);
  if (in.count(1) * vocab != in.count(0) || in.count(2) != 1 ||
      in.count(3) != in.count(0))
    return in.fail("logits, labels, grad and result do not agree");
  llvm::Expected<VocabBlock> block = vocabBlock(in, vocab);
  if (!block)
    return block.takeError();
  return cpu::crossEntropyGrad(
      in.data<float>(0), in.data<int32_t>(1), in.count(1), *block,
      in->cross_entropy().ignore_index(), rowReduce(in), *in.data<float>(2),
      in.data<float>(3));
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// global_norm, or without `root` sum_squares: the sum of squares of every
/// input's elements, in order.
template <bool root> llvm::Error runSumOfSquares(const InstructionView &in) {
  int inputs = in.numOperands();
  if (in.numResults() != 1 || in.dtype(inputs) != F32 || in.count(inputs) != 1)
    return in.fail("expects inputs and one f32 scalar result");
  double sumSquares = 0;
  for (int i = 0; i < inputs; ++i) {
    if (in.dtype(i) != F32)
      return in.fail("inputs must be f32");
    cpu::accumulateSquares(in.data<float>(i), in.count(i), sumSquares);
  }
  *in.data<float>(inputs) = float(root ? std::sqrt(sumSquares) : sumSquares);
  return llvm::Error::success();
}

llvm::Error runSqrt(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (auto error = in.expectSameCount(0, 1))
    return error;
  const float *x = in.data<float>(0);
  float *out = in.data<float>(1);
  for (int64_t i = 0; i < in.count(0); ++i)
    out[i] = std::sqrt(x[i]);
  return llvm::Error::success();
}

llvm::Error runClipCoefficient(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1)
    return in.fail("expects scalars");
  *in.data<float>(1) = cpu::clipCoefficient(*in.data<float>(0),
                                            in->clip_coefficient().max_norm());
  return llvm::Error::success();
}

llvm::Error runLrSchedule(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {I64, I64, F32}, {0, 0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1 || in.count(2) != 1)
    return in.fail("expects scalars");
  *in.data<float>(2) = cpu::scheduledLr(
      *in.data<int64_t>(0), *in.data<int64_t>(1), in->lr_schedule().lr(),
      in->lr_schedule().warmup_steps());
  return llvm::Error::success();
}

llvm::Error runAdamW(const InstructionView &in) {
  llvm::Expected<AdamWSettings> settings = adamwSettings(in);
  if (!settings)
    return settings.takeError();
  cpu::adamw(in.data<float>(0), in.data<float>(1), in.data<float>(2),
             in.data<float>(3), *in.data<float>(4), *in.data<float>(5),
             *in.data<int64_t>(6), *settings, in.data<float>(7),
             in.data<float>(8), in.data<float>(9), in.count(0));
  return llvm::Error::success();
}

llvm::Error runIncrement(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {I64, I64}, {0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1)
    return in.fail("expects scalars");
  *in.data<int64_t>(1) = *in.data<int64_t>(0) + 1;
  return llvm::Error::success();
}

/// add: floats elementwise, or token counts (a tiled loss's tiles').
llvm::Error runAdd(const InstructionView &in) {
  if (in.numOperands() != 2 || in.numResults() != 1 || in.dtype(0) != I64)
    return runElementwise<cpu::add>(in);
  if (auto error = in.expect(2, 1, {I64, I64, I64}, {0, 0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1 || in.count(2) != 1)
    return in.fail("adds counts only as scalars");
  *in.data<int64_t>(2) = *in.data<int64_t>(0) + *in.data<int64_t>(1);
  return llvm::Error::success();
}

/// The kernel of each opcode: a switch over every one of them.
Kernel kernelOf(Opcode opcode) {
  switch (opcode) {
  case EMBEDDING:
    return runEmbedding;
  case MATMUL:
    return runMatmul;
  case RMS_NORM:
    return runRmsNorm;
  case ROPE:
    return runRope<false>;
  case ATTENTION:
    return runAttention;
  case ADD:
    return runAdd;
  case MUL:
    return runElementwise<cpu::mul>;
  case SWIGLU:
    return runElementwise<cpu::swiglu>;
  case DIV:
    return runElementwise<cpu::div>;
  case SCALE:
    return runScale;
  case DROPOUT:
    return runDropout;
  case ROW_SUM_SQUARES:
  case SCALE_COLUMNS:
  case SCALE_COLUMNS_GRAD:
    return runColumns;
  case CROSS_ENTROPY:
    return runCrossEntropy;
  case RESHAPE:
    return runReshape;
  case TRANSPOSE:
    return runTranspose;
  case CAST:
    return runCast;
  case CONSTANT:
    return runConstant;
  case EMBEDDING_GRAD:
    return runEmbeddingGrad;
  case RMS_NORM_GRAD:
    return runRmsNormGrad;
  case RMS_NORM_WEIGHT_GRAD:
    return runRmsNormWeightGrad;
  case ROPE_GRAD:
    return runRope<true>;
  case ATTENTION_GRAD:
    return runAttentionGrad;
  case SWIGLU_GRAD:
    return runSwigluGrad;
  case CROSS_ENTROPY_GRAD:
    return runCrossEntropyGrad;
  case LINEAR_CROSS_ENTROPY:
  case LINEAR_CROSS_ENTROPY_GRAD:
    return runLinearCrossEntropy;
  case OFFLOAD:
  case RELOAD:
  case OFFLOAD_START: // copied at once: its wait has nothing left to do
  case RELOAD_START:
    return runTransfer;
  case SPLIT:
  case CONCAT:
    return runPieces;
  case GLOBAL_NORM:
    return runSumOfSquares<true>;
  case SUM_SQUARES:
    return runSumOfSquares<false>;
  case SQRT:
    return runSqrt;
  case CLIP_COEFFICIENT:
    return runClipCoefficient;
  case LR_SCHEDULE:
    return runLrSchedule;
  case ADAMW:
    return runAdamW;
  case INCREMENT:
    return runIncrement;
  case LOCAL_SLICE:
    return runLocalSlice;
  case ALL_GATHER:
  case REDUCE_SCATTER:
  case ALL_REDUCE:
  case ALL_TO_ALL:
  case ALL_GATHER_START:
  case REDUCE_SCATTER_START:
  case ALL_REDUCE_START:
  case ALL_TO_ALL_START:
  case WAIT: // CpuCollectives runs these
  case OPCODE_UNSPECIFIED:
    break;
  }
  return nullptr;
}

} // namespace

/// Runs `kernel` on fp32 copies of the instruction's bf16 values: every
/// kernel computes in fp32, and each bf16 result is rounded once.
static llvm::Error runWidened(Kernel kernel, const Instruction &instruction,
                              BufferSet &buffers, Communicator *comm) {
  WideCopies wide(buffers, instruction);
  auto address = [&](int id) { return wide.address(id); };
  if (llvm::Error error =
          kernel(InstructionView(buffers.executable(), instruction, address,
                                 comm, /*widened=*/wide.any())))
    return error;
  for (int id : wide.bf16.written)
    wide.narrow(id);
  return llvm::Error::success();
}

/// Runs one instruction that is not a collective, its start or its wait.
static llvm::Error runKernel(const Instruction &instruction, BufferSet &buffers,
                             Communicator *comm) {
  Kernel kernel = kernelOf(instruction.opcode());
  if (!kernel) // the loader refuses such a program
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "no opcode");
  return runWidened(kernel, instruction, buffers, comm);
}

Backend::PeakMemory CpuBackend::peakMemory() const {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return {uint64_t(usage.ru_maxrss) * 1024, "the process's resident set"};
}

llvm::Error CpuBackend::run(const EntryPoint &entry, BufferSet &buffers,
                            Communicator *comm, Profiler *profiler) {
  CpuCollectives collectives(buffers, comm);
  // When each collective in flight started, by its result, for the
  // profile: its span on the communication track runs to its wait.
  llvm::DenseMap<int, std::pair<int, double>> started;
  // The results of copies started (to or from the host arena): made at the
  // start, as a plain copy, so that their waits have nothing to do.
  llvm::DenseSet<int> copied;
  return forEachInstruction(
      entry, [&](int index, const Instruction &instruction) -> llvm::Error {
        Opcode opcode = instruction.opcode();
        double start = profiler ? profiler->now() : 0;
        llvm::Error error = llvm::Error::success();
        if (opcode == WAIT && instruction.operands_size() == 1 &&
            copied.erase(instruction.operands(0))) {
          // A copy's wait.
        } else if (opcode == WAIT || isCollective(opcode)) {
          // The result in flight: a start's, or the one a wait ends.
          const auto &ids =
              opcode == WAIT ? instruction.operands() : instruction.results();
          if (ids.size() != 1)
            return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                           opcodeName(opcode) +
                                               ": needs one result in flight");
          int result = ids[0];
          if (opcode != WAIT) {
            error = collectives.start(instruction);
            if (profiler)
              started[result] = {index, start};
          }
          if (!error && !isStart(opcode))
            error = collectives.wait(result);
          if (profiler && !isStart(opcode)) {
            auto [first, since] = started.lookup(result);
            profiler->record({Profiler::Communication, &entry, first, since,
                              profiler->now()});
          }
        } else {
          error = runKernel(instruction, buffers, comm);
          if (!error && isStart(opcode))
            copied.insert(instruction.results(0));
        }
        if (!error)
          error = collectives.progress();
        if (profiler)
          profiler->record(
              {Profiler::Compute, &entry, index, start, profiler->now()});
        return error;
      });
}

llvm::Error CpuBackend::run(const EntryPoint &entry,
                            llvm::ArrayRef<WriteBack> writeBacks) {
  double start = profiler ? profiler->now() : 0;
  if (llvm::Error error = run(entry, buffers, comm, profiler))
    return error;
  for (auto [source, target] : writeBacks)
    std::memcpy(buffers.data(target), buffers.data(source),
                buffers.info(target).size_bytes());
  if (profiler)
    profiler->record(
        {Profiler::EntryPoints, &entry, -1, start, profiler->now()});
  return llvm::Error::success();
}

/// The threads of this rank's kernels and GEMMs (one OpenMP pool: oneDNN
/// runs on OpenMP too): OMP_NUM_THREADS if set; else the cores the
/// launcher bound this rank to; else the machine's cores shared among the
/// ranks on it, so that ranks never oversubscribe them.
static int threadsPerRank() {
  if (std::getenv("OMP_NUM_THREADS"))
    return omp_get_max_threads();
  cpu_set_t allowed;
  int usable = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                   ? CPU_COUNT(&allowed)
                   : int(sysconf(_SC_NPROCESSORS_ONLN));
  if (usable < sysconf(_SC_NPROCESSORS_ONLN))
    return std::max(usable, 1);
  return std::max(usable / Communicator::ranksOnThisNode(), 1);
}

void twill::useRankThreads() {
  static std::once_flag threadsSet;
  std::call_once(threadsSet, [] { omp_set_num_threads(threadsPerRank()); });
}

std::unique_ptr<Backend> twill::createCpuBackend(BufferSet &buffers,
                                                 Communicator *comm) {
  useRankThreads();
  return std::make_unique<CpuBackend>(buffers, comm);
}
