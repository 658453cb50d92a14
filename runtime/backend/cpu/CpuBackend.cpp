//===- CpuBackend.cpp - runs an Executable on the CPU ---------------------===//

#include "runtime/backend/cpu/CpuBackend.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>

using namespace twill;

namespace {

/// One instruction's operands, results and attributes, with the checks its
/// kernel needs.
class InstructionView {
public:
  InstructionView(const Instruction &instruction, BufferSet &buffers,
                  Communicator *comm)
      : executable(buffers.executable()), instruction(instruction),
        buffers(buffers), comm(comm) {}

  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   instruction.op() + ": " + what);
  }

  /// The buffer of operand (or, after the operands, result) `index`.
  int bufferId(int index) const {
    return index < instruction.operands_size()
               ? instruction.operands(index)
               : instruction.results(index - instruction.operands_size());
  }
  llvm::StringRef op() const { return instruction.op(); }
  int numOperands() const { return instruction.operands_size(); }
  int numResults() const { return instruction.results_size(); }
  const Buffer &info(int index) const {
    return executable.buffers(bufferId(index));
  }
  llvm::ArrayRef<int64_t> shape(int index) const {
    return llvm::ArrayRef<int64_t>(info(index).shape().data(),
                                   info(index).shape_size());
  }
  int64_t count(int index) const { return numElements(info(index)); }
  int64_t dim(int index, int fromEnd) const {
    return shape(index)[shape(index).size() - 1 - fromEnd];
  }

  template <typename T> T *data(int index) const {
    return buffers.as<T>(bufferId(index));
  }

  /// Fails unless the instruction has `operands` operands and `results`
  /// results, with these dtypes (operands first) and at least these ranks.
  llvm::Error expect(int operands, int results,
                     std::initializer_list<DType> dtypes,
                     std::initializer_list<int> minRanks) const {
    if (instruction.operands_size() != operands ||
        instruction.results_size() != results)
      return fail(llvm::formatv("expects {0} operands and {1} results",
                                operands, results));
    int index = 0;
    for (auto [dtype, rank] : llvm::zip_equal(dtypes, minRanks)) {
      if (info(index).dtype() != dtype)
        return fail(llvm::formatv("value {0} has dtype {1}, the cpu backend "
                                  "needs {2}",
                                  index, DType_Name(info(index).dtype()),
                                  DType_Name(dtype)));
      if ((int)shape(index).size() < rank)
        return fail(
            llvm::formatv("value {0} needs rank {1} or more", index, rank));
      ++index;
    }
    return llvm::Error::success();
  }

  llvm::Error expectSameCount(int a, int b) const {
    if (count(a) == count(b))
      return llvm::Error::success();
    return fail(llvm::formatv("values {0} and {1} differ in size", a, b));
  }

  const AttributeValue *attribute(llvm::StringRef name) const {
    auto it = instruction.attributes().find(name.str());
    return it == instruction.attributes().end() ? nullptr : &it->second;
  }
  double floatAttr(llvm::StringRef name, double otherwise) const {
    const AttributeValue *value = attribute(name);
    return value ? value->float_value() : otherwise;
  }
  int64_t intAttr(llvm::StringRef name, int64_t otherwise) const {
    const AttributeValue *value = attribute(name);
    return value ? value->int_value() : otherwise;
  }
  std::string stringAttr(llvm::StringRef name) const {
    const AttributeValue *value = attribute(name);
    return value ? value->string_value() : std::string();
  }
  /// The communicator, or an error for a program run without one.
  llvm::Expected<Communicator *> communicator() const {
    if (comm)
      return comm;
    return fail("needs a communicator: run it under twill-train");
  }
  bool flag(llvm::StringRef name) const {
    const AttributeValue *value = attribute(name);
    return value && value->bool_value();
  }

private:
  const Executable &executable;
  const Instruction &instruction;
  BufferSet &buffers;
  Communicator *comm;
};

using Kernel = llvm::Error (*)(const InstructionView &);

/// This rank's coordinate along a mesh axis, and the axis size.
struct AxisPosition {
  int coordinate = 0, size = 1;
};

/// Where this rank is along the instruction's `shard_axis`, if it has one:
/// partitioning gave it for ops that hold one rank's block and need its
/// offset.
llvm::Expected<std::optional<AxisPosition>>
shardAxis(const InstructionView &in) {
  std::string axis = in.stringAttr("shard_axis");
  if (axis.empty())
    return std::nullopt;
  llvm::Expected<Communicator *> comm = in.communicator();
  if (!comm)
    return comm.takeError();
  int size = (*comm)->axisSize(axis);
  if (size < 0)
    return in.fail("the mesh has no axis '" + axis + "'");
  return AxisPosition{(*comm)->coordinate(axis), size};
}

llvm::Error runEmbedding(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, I32, F32}, {2, 0, 1}))
    return error;
  int64_t dim = in.dim(0, 0), rows = in.shape(0)[0];
  if (in.count(2) != in.count(1) * dim)
    return in.fail("result size is not ids x hidden");
  auto position = shardAxis(in);
  if (!position)
    return position.takeError();
  std::optional<int64_t> firstRow;
  if (*position)
    firstRow = (*position)->coordinate * rows;
  return cpu::embedding(in.data<float>(0), rows, dim, in.data<int32_t>(1),
                        in.count(1), in.data<float>(2), firstRow);
}

llvm::Error runMatmul(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, F32, F32}, {2, 2, 2}))
    return error;
  bool transposeLhs = in.flag("transpose_lhs");
  bool transposeRhs = in.flag("transpose_rhs");
  int64_t m = in.dim(0, transposeLhs ? 0 : 1);
  int64_t k = in.dim(0, transposeLhs ? 1 : 0);
  int64_t n = in.dim(1, transposeRhs ? 1 : 0);
  int64_t rhsK = in.dim(1, transposeRhs ? 0 : 1);
  int64_t batch = in.count(0) / std::max<int64_t>(m * k, 1);
  bool rhsBatched = in.shape(1).size() > 2;
  if (in.shape(2).size() == 2 && in.shape(0).size() > 2) {
    // A matrix from batched operands sums over the batch too: the batch
    // dims are more rows of the (transposed) lhs and of the rhs.
    if (!transposeLhs || transposeRhs)
      return in.fail("sums over batch dims only with transpose_lhs");
    k *= batch;
    rhsK = in.count(1) / std::max<int64_t>(n, 1);
    batch = 1;
    rhsBatched = false;
  }
  if (k != rhsK || in.count(2) != batch * m * n ||
      (rhsBatched && in.count(1) != batch * k * n))
    return in.fail("operand shapes do not multiply");
  cpu::matmul(in.data<float>(0), in.data<float>(1), in.data<float>(2), batch, m,
              n, k, transposeLhs, transposeRhs, rhsBatched);
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
               in.floatAttr("epsilon", 0));
  return llvm::Error::success();
}

/// rope and rope_grad: the same rotation, forwards or backwards.
template <bool Inverse> llvm::Error runRope(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {F32, I32, F32}, {4, 2, 4}))
    return error;
  int64_t headDim = in.dim(0, 0), heads = in.dim(0, 1);
  int64_t tokens = in.count(0) / std::max<int64_t>(heads * headDim, 1);
  if (in.count(1) != tokens)
    return in.fail("positions do not match the tokens");
  if (auto error = in.expectSameCount(0, 2))
    return error;
  cpu::RopeScaling scaling;
  scaling.factor = in.floatAttr("scaling_factor", 0);
  scaling.lowFreqFactor = in.floatAttr("low_freq_factor", 0);
  scaling.highFreqFactor = in.floatAttr("high_freq_factor", 0);
  scaling.originalMaxPosition = in.intAttr("original_max_position", 0);
  cpu::rope(in.data<float>(0), in.data<int32_t>(1), in.data<float>(2), tokens,
            heads, headDim, in.floatAttr("theta", 10000), scaling, Inverse);
  return llvm::Error::success();
}

/// The query heads of an attention op: all of them, or with `shard_axis`
/// this rank's block over every key/value head.
llvm::Expected<cpu::HeadBlock> headBlock(const InstructionView &in,
                                         int64_t heads, int64_t kvHeads) {
  auto position = shardAxis(in);
  if (!position)
    return position.takeError();
  cpu::HeadBlock block = cpu::HeadBlock::whole(heads);
  if (*position)
    block = {heads, (*position)->coordinate * heads,
             heads * (*position)->size};
  if (kvHeads == 0 || block.total % kvHeads != 0)
    return in.fail("query heads are no multiple of key/value heads");
  return block;
}

llvm::Error runAttention(const InstructionView &in) {
  bool hasSegments = in.info(3).dtype() == I32;
  llvm::Error error =
      hasSegments ? in.expect(4, 1, {F32, F32, F32, I32, F32}, {4, 4, 4, 2, 4})
                  : in.expect(3, 1, {F32, F32, F32, F32}, {4, 4, 4, 4});
  if (error)
    return error;
  llvm::ArrayRef<int64_t> q = in.shape(0), k = in.shape(1);
  llvm::Expected<cpu::HeadBlock> heads = headBlock(in, q[2], k[2]);
  if (!heads)
    return heads.takeError();
  if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3] || in.shape(2) != k ||
      in.count(hasSegments ? 4 : 3) != in.count(0) ||
      (hasSegments && in.count(3) != q[0] * q[1]))
    return in.fail("query, key, value and segment shapes do not agree");
  cpu::attention(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                 hasSegments ? in.data<int32_t>(3) : nullptr,
                 in.data<float>(hasSegments ? 4 : 3), q[0], q[1], *heads, k[2],
                 q[3], in.floatAttr("scale", 1));
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
  cpu::scale(in.data<float>(0), in.floatAttr("factor", 1), in.data<float>(1),
             in.count(0));
  return llvm::Error::success();
}

/// The logits' columns: the whole vocab, or with `shard_axis` this rank's
/// block of a `vocab_size` vocab.
llvm::Expected<cpu::VocabBlock> vocabBlock(const InstructionView &in,
                                           int64_t columns) {
  auto position = shardAxis(in);
  if (!position)
    return position.takeError();
  if (!*position)
    return cpu::VocabBlock::whole(columns);
  int64_t vocab = in.intAttr("vocab_size", -1);
  if (vocab <= 0 || vocab > columns * (*position)->size)
    return in.fail("needs a vocab_size its blocks cover");
  return cpu::VocabBlock{columns, (*position)->coordinate * columns, vocab};
}

/// Row statistics summed (or maxed) over the `shard_axis` ranks.
auto rowReduce(const InstructionView &in) {
  return [&in](std::vector<double> &rows, bool max) -> llvm::Error {
    std::string axis = in.stringAttr("shard_axis");
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
  llvm::Expected<cpu::VocabBlock> block = vocabBlock(in, vocab);
  if (!block)
    return block.takeError();
  return cpu::crossEntropy(in.data<float>(0), in.data<int32_t>(1), in.count(1),
                           *block, in.intAttr("ignore_index", -100),
                           rowReduce(in), in.data<float>(2),
                           in.data<int64_t>(3));
}

llvm::Error runReshape(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (auto error = in.expectSameCount(0, 1))
    return error;
  std::memcpy(in.data<float>(1), in.data<float>(0),
              in.count(0) * sizeof(float));
  return llvm::Error::success();
}

llvm::Error runTranspose(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  const AttributeValue *permutation = in.attribute("permutation");
  llvm::ArrayRef<int64_t> shape = in.shape(0);
  if (!permutation ||
      permutation->int_list().values_size() != (int)shape.size())
    return in.fail("needs a permutation of every dim");
  std::vector<bool> seen(shape.size(), false);
  for (int64_t dim : permutation->int_list().values()) {
    if (dim < 0 || dim >= (int64_t)shape.size() || seen[dim])
      return in.fail("permutation is not a permutation");
    seen[dim] = true;
  }
  if (auto error = in.expectSameCount(0, 1))
    return error;
  cpu::transpose(in.data<float>(0), shape.data(),
                 permutation->int_list().values().data(), shape.size(),
                 in.data<float>(1));
  return llvm::Error::success();
}

llvm::Error runCast(const InstructionView &in) {
  DType from = in.info(0).dtype();
  if (in.info(1).dtype() != F32 || (from != F32 && from != I32 && from != I64))
    return in.fail("the cpu backend casts f32, i32 and i64 to f32 only");
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
  cpu::fill(in.data<float>(0), in.count(0), in.floatAttr("value", 0));
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
                   dim, in.floatAttr("epsilon", 0));
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
      in.count(0) / std::max<int64_t>(dim, 1), dim, in.floatAttr("epsilon", 0));
  return llvm::Error::success();
}

llvm::Error runAttentionGrad(const InstructionView &in) {
  bool hasSegments = in.info(5).dtype() == I32;
  llvm::Error error =
      hasSegments
          ? in.expect(6, 3, {F32, F32, F32, F32, F32, I32, F32, F32, F32},
                      {4, 4, 4, 4, 4, 2, 4, 4, 4})
          : in.expect(5, 3, {F32, F32, F32, F32, F32, F32, F32, F32},
                      {4, 4, 4, 4, 4, 4, 4, 4});
  if (error)
    return error;
  llvm::ArrayRef<int64_t> q = in.shape(0), k = in.shape(1);
  int first = hasSegments ? 6 : 5; // the first result
  llvm::Expected<cpu::HeadBlock> heads = headBlock(in, q[2], k[2]);
  if (!heads)
    return heads.takeError();
  if (q[0] != k[0] || q[1] != k[1] || q[3] != k[3] || in.shape(2) != k ||
      in.shape(3) != q ||
      in.shape(4) != q || in.shape(first) != q || in.shape(first + 1) != k ||
      in.shape(first + 2) != k || (hasSegments && in.count(5) != q[0] * q[1]))
    return in.fail("query, key, value, output and grad shapes do not agree");
  cpu::attentionGrad(in.data<float>(0), in.data<float>(1), in.data<float>(2),
                     in.data<float>(3), in.data<float>(4),
                     hasSegments ? in.data<int32_t>(5) : nullptr,
                     in.data<float>(first), in.data<float>(first + 1),
                     in.data<float>(first + 2), q[0], q[1], *heads, k[2], q[3],
                     in.floatAttr("scale", 1));
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
  llvm::Expected<cpu::VocabBlock> block = vocabBlock(in, vocab);
  if (!block)
    return block.takeError();
  return cpu::crossEntropyGrad(in.data<float>(0), in.data<int32_t>(1),
                               in.count(1), *block,
                               in.intAttr("ignore_index", -100), rowReduce(in),
                               *in.data<float>(2), in.data<float>(3));
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// global_norm, or without `root` sum_squares: the sum of squares of every
/// input's elements, in order.
template <bool root> llvm::Error runSumOfSquares(const InstructionView &in) {
  int inputs = in.numOperands();
  if (in.numResults() != 1 || in.info(inputs).dtype() != F32 ||
      in.count(inputs) != 1)
    return in.fail("expects inputs and one f32 scalar result");
  double sumSquares = 0;
  for (int i = 0; i < inputs; ++i) {
    if (in.info(i).dtype() != F32)
      return in.fail("inputs must be f32");
    cpu::accumulateSquares(in.data<float>(i), in.count(i), sumSquares);
  }
  *in.data<float>(inputs) = float(root ? std::sqrt(sumSquares) : sumSquares);
  return llvm::Error::success();
}

llvm::Error runSqrt(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1)
    return in.fail("expects scalars");
  *in.data<float>(1) = std::sqrt(*in.data<float>(0));
  return llvm::Error::success();
}

llvm::Error runClipCoefficient(const InstructionView &in) {
  if (auto error = in.expect(1, 1, {F32, F32}, {0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1)
    return in.fail("expects scalars");
  *in.data<float>(1) =
      cpu::clipCoefficient(*in.data<float>(0), in.floatAttr("max_norm", 1));
  return llvm::Error::success();
}

llvm::Error runLrSchedule(const InstructionView &in) {
  if (auto error = in.expect(2, 1, {I64, I64, F32}, {0, 0, 0}))
    return error;
  if (in.count(0) != 1 || in.count(1) != 1 || in.count(2) != 1)
    return in.fail("expects scalars");
  *in.data<float>(2) =
      cpu::scheduledLr(*in.data<int64_t>(0), *in.data<int64_t>(1),
                       in.floatAttr("lr", 0), in.intAttr("warmup_steps", 0));
  return llvm::Error::success();
}

llvm::Error runAdamW(const InstructionView &in) {
  if (auto error =
          in.expect(7, 3, {F32, F32, F32, F32, F32, F32, I64, F32, F32, F32},
                    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
    return error;
  for (int index : {1, 2, 3, 7, 8, 9})
    if (auto error = in.expectSameCount(0, index))
      return error;
  if (in.count(4) != 1 || in.count(5) != 1 || in.count(6) != 1)
    return in.fail("lr, grad_scale and step must be scalars");
  cpu::AdamWSettings settings{
      in.floatAttr("beta1", 0.9), in.floatAttr("beta2", 0.999),
      in.floatAttr("eps", 1e-8), in.floatAttr("weight_decay", 0)};
  cpu::adamw(in.data<float>(0), in.data<float>(1), in.data<float>(2),
             in.data<float>(3), *in.data<float>(4), *in.data<float>(5),
             *in.data<int64_t>(6), settings, in.data<float>(7),
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

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Copies, for every index of the dims before `dim`, `length` slices of
/// `dim` from `from` (starting at slice `first` of `fromSize`) into the
/// start of `to` (`toSize` slices), zero-filling the rest of `to`; a slice
/// is `inner` elements of `T`.
template <typename T>
void copyAlongDim(const T *from, int64_t fromSize, int64_t first, T *to,
                  int64_t toSize, int64_t length, int64_t outer,
                  int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    T *row = to + o * toSize * inner;
    std::fill(row, row + toSize * inner, T());
    if (length > 0)
      std::copy_n(from + (o * fromSize + first) * inner, length * inner, row);
  }
}

/// The collectives: blocks along a dim are ceil(size / ranks) long; a
/// gather drops the last block's padding, a scatter or slice pads with
/// zeros, so no size has to divide by the axis.
llvm::Error runCollective(const InstructionView &in) {
  llvm::StringRef op = in.op();
  // Integers: token counts are summed, positions are sliced.
  DType dtype = in.info(0).dtype();
  bool integer = (op == "twill.all_reduce" && dtype == I64) ||
                 (op == "twill.local_slice" && dtype == I32);
  if (auto error = in.expect(1, 1, {integer ? dtype : F32, integer ? dtype : F32},
                             {0, 0}))
    return error;
  llvm::Expected<Communicator *> comm = in.communicator();
  if (!comm)
    return comm.takeError();
  std::string axis = in.stringAttr("axis");
  int size = (*comm)->axisSize(axis);
  if (size < 0)
    return in.fail("the mesh has no axis '" + axis + "'");
  if (op == "twill.all_reduce") {
    if (in.count(0) != in.count(1))
      return in.fail("result size differs from the input's");
    return dtype == I64 ? (*comm)->allReduce(axis, in.data<int64_t>(0),
                                        in.data<int64_t>(1), in.count(0))
                   : (*comm)->allReduce(axis, in.data<float>(0),
                                        in.data<float>(1), in.count(0));
  }
  llvm::ArrayRef<int64_t> inShape = in.shape(0), outShape = in.shape(1);
  int64_t rank = inShape.size();
  auto dimAttr = [&](llvm::StringRef name) -> llvm::Expected<int64_t> {
    int64_t dim = in.intAttr(name, -1);
    if (dim < 0 || dim >= rank || (int64_t)outShape.size() != rank)
      return in.fail(name + " is not a dim of the input and result");
    return dim;
  };
  if (op == "twill.all_to_all") {
    llvm::Expected<int64_t> split = dimAttr("split_dim");
    if (!split)
      return split.takeError();
    llvm::Expected<int64_t> concat = dimAttr("concat_dim");
    if (!concat)
      return concat.takeError();
    if (in.count(1) != in.count(0))
      return in.fail("result size differs from the input's");
    return (*comm)->allToAll(axis, in.data<float>(0), in.data<float>(1),
                             inShape, *split, *concat);
  }
  llvm::Expected<int64_t> dim = dimAttr("dim");
  if (!dim)
    return dim.takeError();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d < *dim)
      outer *= inShape[d];
    else if (d > *dim)
      inner *= inShape[d];
  int64_t whole = op == "twill.all_gather" ? outShape[*dim] : inShape[*dim];
  int64_t block = (whole + size - 1) / size;
  int64_t local = op == "twill.all_gather" ? inShape[*dim] : outShape[*dim];
  if (local != block)
    return in.fail("block size does not match the axis size");
  int coordinate = (*comm)->coordinate(axis);
  if (op == "twill.local_slice") {
    int64_t first = std::min(whole, coordinate * block);
    int64_t length = std::min(block, whole - first);
    if (dtype == I32)
      copyAlongDim(in.data<int32_t>(0), whole, first, in.data<int32_t>(1),
                   block, length, outer, inner);
    else
      copyAlongDim(in.data<float>(0), whole, first, in.data<float>(1), block,
                   length, outer, inner);
    return llvm::Error::success();
  }
  const float *input = in.data<float>(0);
  float *output = in.data<float>(1);
  // The padded whole: `size` blocks.
  llvm::SmallVector<int64_t> paddedShape(inShape);
  paddedShape[*dim] = block * size;
  std::vector<float> padded(outer * block * size * inner);
  if (op == "twill.all_gather") {
    if (auto error = (*comm)->allGather(axis, input, padded.data(), inShape,
                                        *dim))
      return error;
    copyAlongDim(padded.data(), block * size, 0, output, whole, whole, outer,
                 inner);
    return llvm::Error::success();
  }
  if (op != "twill.reduce_scatter")
    return in.fail("is no collective the cpu backend knows");
  copyAlongDim(input, whole, 0, padded.data(), block * size, whole, outer,
               inner);
  return (*comm)->reduceScatter(axis, padded.data(), output, paddedShape,
                                *dim);
}

const llvm::StringMap<Kernel> &kernels() {
  static const llvm::StringMap<Kernel> table = {
      {"twill.embedding", runEmbedding},
      {"twill.matmul", runMatmul},
      {"twill.rms_norm", runRmsNorm},
      {"twill.rope", runRope<false>},
      {"twill.attention", runAttention},
      {"twill.add", runElementwise<cpu::add>},
      {"twill.mul", runElementwise<cpu::mul>},
      {"twill.swiglu", runElementwise<cpu::swiglu>},
      {"twill.div", runElementwise<cpu::div>},
      {"twill.scale", runScale},
      {"twill.cross_entropy", runCrossEntropy},
      {"twill.reshape", runReshape},
      {"twill.transpose", runTranspose},
      {"twill.cast", runCast},
      {"twill.constant", runConstant},
      {"twill.embedding_grad", runEmbeddingGrad},
      {"twill.rms_norm_grad", runRmsNormGrad},
      {"twill.rms_norm_weight_grad", runRmsNormWeightGrad},
      {"twill.rope_grad", runRope<true>},
      {"twill.attention_grad", runAttentionGrad},
      {"twill.swiglu_grad", runSwigluGrad},
      {"twill.cross_entropy_grad", runCrossEntropyGrad},
      {"twill.global_norm", runSumOfSquares<true>},
      {"twill.sum_squares", runSumOfSquares<false>},
      {"twill.sqrt", runSqrt},
      {"twill.clip_coefficient", runClipCoefficient},
      {"twill.lr_schedule", runLrSchedule},
      {"twill.adamw", runAdamW},
      {"twill.increment", runIncrement},
      {"twill.all_gather", runCollective},
      {"twill.reduce_scatter", runCollective},
      {"twill.all_reduce", runCollective},
      {"twill.all_to_all", runCollective},
      {"twill.local_slice", runCollective},
  };
  return table;
}

} // namespace

llvm::Error CpuBackend::run(const EntryPoint &entry, BufferSet &buffers,
                            Communicator *comm) {
  for (int index = 0; index < entry.instructions_size(); ++index) {
    const Instruction &instruction = entry.instructions(index);
    auto kernel = kernels().find(instruction.op());
    llvm::Error error =
        kernel == kernels().end()
            ? llvm::createStringError(llvm::inconvertibleErrorCode(),
                                      "the cpu backend has no kernel for " +
                                          instruction.op())
            : kernel->second(InstructionView(instruction, buffers, comm));
    if (error)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          llvm::formatv("{0}, instruction {1}: {2}", entry.name(), index,
                        llvm::toString(std::move(error))));
  }
  return llvm::Error::success();
}
