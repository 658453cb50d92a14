//===- InstructionView.h - one instruction, checked for its kernel -*- C++
//-*-===//
//
// What every backend's kernels see of an instruction: its operands and
// results (shapes, dtypes, where their values are), its attributes, and the
// checks a kernel makes before it touches memory, so a corrupt Executable is
// an error, never an out-of-bounds access.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H
#define TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H

#include "runtime/backend/Blocks.h"
#include "runtime/backend/Gemm.h"
#include "runtime/backend/TiledLogits.h"
#include "runtime/comm/Communicator.h"
#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"
#include "support/BlockedPieces.h"
#include "support/Dropout.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <optional>
#include <string>

namespace twill {

/// One instruction's operands, results and attributes, with the checks its
/// kernel needs.
class InstructionView {
public:
  /// `address` gives where a buffer's values are: host memory for the cpu
  /// backend, device memory for cuda. `widened`: the backend gives the
  /// kernel its bf16 values widened to fp32 (see bf16Buffers), so they
  /// show as F32.
  InstructionView(const Executable &executable, const Instruction &instruction,
                  llvm::function_ref<void *(int id)> address,
                  Communicator *comm, bool widened = false)
      : executable(executable), instruction(instruction), address(address),
        comm(comm), widened(widened) {}

  llvm::Error fail(const llvm::Twine &what) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   opcodeName(opcode()) + ": " + what);
  }

  /// The buffer of operand (or, after the operands, result) `index`.
  int bufferId(int index) const {
    return index < instruction.operands_size()
               ? instruction.operands(index)
               : instruction.results(index - instruction.operands_size());
  }
  Opcode opcode() const { return instruction.opcode(); }
  /// The instruction itself: its attributes, by kind.
  const Instruction &operator*() const { return instruction; }
  const Instruction *operator->() const { return &instruction; }
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
  /// The dtype of the values the kernel sees.
  DType dtype(int index) const {
    DType stored = info(index).dtype();
    return widened && stored == BF16 ? F32 : stored;
  }
  /// The float dtype of value `index` as the kernel sees it: bf16 (for a
  /// kernel that reads bf16 as stored) or fp32; checks compare the rest of
  /// the model's values against it.
  DType floatType(int index = 0) const {
    return dtype(index) == BF16 ? BF16 : F32;
  }
  int64_t dim(int index, int fromEnd) const {
    return shape(index)[shape(index).size() - 1 - fromEnd];
  }

  template <typename T> T *data(int index) const {
    return static_cast<T *>(address(bufferId(index)));
  }

  /// Fails unless the instruction has `operands` operands and `results`
  /// results, with these dtypes (operands first) and at least these ranks.
  llvm::Error expect(int operands, int results, llvm::ArrayRef<DType> dtypes,
                     llvm::ArrayRef<int> minRanks) const {
    if (instruction.operands_size() != operands ||
        instruction.results_size() != results)
      return fail(llvm::formatv("expects {0} operands and {1} results",
                                operands, results));
    int index = 0;
    for (auto [dtype, rank] : llvm::zip_equal(dtypes, minRanks)) {
      if (this->dtype(index) != dtype)
        return fail(llvm::formatv("value {0} has dtype {1}, the kernel "
                                  "needs {2}",
                                  index, DType_Name(this->dtype(index)),
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

  /// The communicator, or an error for a program run without one.
  llvm::Expected<Communicator *> communicator() const {
    if (comm)
      return comm;
    return fail("needs a communicator: run it under twill-train");
  }

private:
  const Executable &executable;
  const Instruction &instruction;
  llvm::function_ref<void *(int id)> address;
  Communicator *comm;
  bool widened;
};

/// The distinct bf16 buffers of an instruction, those it reads and those it
/// writes. A backend without a bf16 kernel for the op widens the first to
/// fp32 before the kernel and rounds the second back after it: bf16
/// storage, fp32 compute, one rounding per result.
struct BF16Buffers {
  llvm::SmallVector<int> read, written;
  bool empty() const { return read.empty() && written.empty(); }
};

inline BF16Buffers bf16Buffers(const Executable &executable,
                               const Instruction &instruction) {
  BF16Buffers found;
  auto note = [&](int id, llvm::SmallVector<int> &into) {
    if (executable.buffers(id).dtype() == BF16 && !llvm::is_contained(into, id))
      into.push_back(id);
  };
  for (int id : instruction.operands())
    note(id, found.read);
  for (int id : instruction.results())
    note(id, found.written);
  return found;
}

/// This rank's coordinate along a mesh axis, and the axis size.
struct AxisPosition {
  int coordinate = 0, size = 1;
};

/// Where this rank is along an op's `shard_axis`, if it has one (not
/// empty): partitioning gave it for ops that hold one rank's block and need
/// its offset.
inline llvm::Expected<std::optional<AxisPosition>>
shardAxis(const InstructionView &in, const std::string &axis) {
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

/// An embedding's sizes: (table [rows, dim], ids) -> [ids..., dim]; with
/// `shard_axis` the table holds rows [firstRow, firstRow + rows) of the
/// vocab (vocab-parallel), otherwise all of it.
struct EmbeddingShape {
  int64_t rows, dim;
  std::optional<int64_t> firstRow;
};

inline llvm::Expected<EmbeddingShape>
embeddingShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(2, 1, {type, I32, type}, {2, 0, 1}))
    return std::move(error);
  EmbeddingShape shape{in.shape(0)[0], in.dim(0, 0), std::nullopt};
  if (in.count(2) != in.count(1) * shape.dim)
    return in.fail("result size is not ids x hidden");
  auto position = shardAxis(in, in->embedding().shard_axis());
  if (!position)
    return position.takeError();
  if (*position)
    shape.firstRow = (*position)->coordinate * shape.rows;
  return shape;
}

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

/// The rows and columns of DoRA's ops, checked: row_sum_squares (input
/// [rows..., columns] -> [rows...]), scale_columns (input, scale
/// [columns] -> like input) and its gradient (input, scale, grad -> the
/// input's, the scale's).
struct ColumnsShape {
  int64_t rows, columns;
};

inline llvm::Expected<ColumnsShape> columnsShape(const InstructionView &in) {
  DType type = in.floatType();
  int operands = 1, results = 1;
  if (in.opcode() == SCALE_COLUMNS)
    operands = 2;
  else if (in.opcode() == SCALE_COLUMNS_GRAD)
    operands = 3, results = 2;
  std::vector<int> minRanks(operands + results, 0);
  minRanks.front() = 1; // the input has columns
  if (auto error = in.expect(operands, results,
                             std::vector<DType>(operands + results, type),
                             minRanks))
    return std::move(error);
  ColumnsShape shape{0, in.dim(0, 0)};
  shape.rows = in.count(0) / shape.columns;
  if (in.opcode() == ROW_SUM_SQUARES) {
    if (in.count(1) != shape.rows)
      return in.fail("result is not one per row of the input");
    return shape;
  }
  // The scale (and its gradient) one per column; the rest like the input.
  for (int index = 1; index < operands + results; ++index) {
    bool perColumn = index == 1 || index == 4;
    if (in.count(index) != (perColumn ? shape.columns : in.count(0)))
      return in.fail(llvm::formatv("operand or result {0} has {1} values, "
                                   "expected {2}",
                                   index, in.count(index),
                                   perColumn ? shape.columns : in.count(0)));
  }
  return shape;
}

/// A dropout's sizes: (input [tokens..., features], token index [tokens...],
/// micro-batch) -> like input; with `shard_axis` the features are this
/// rank's block, starting at `firstFeature`. The key's micro-batch is the
/// backend's to read from its buffer.
struct DropoutShape {
  int64_t tokens, features, firstFeature = 0;
  DropoutKey key;
};

inline llvm::Expected<DropoutShape> dropoutShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(3, 1, {type, I32, I64, type}, {2, 1, 0, 2}))
    return std::move(error);
  if (in.count(3) != in.count(0) || in.count(2) != 1)
    return in.fail("result and input differ, or the micro-batch is not one "
                   "value");
  DropoutShape shape{in.count(1), in.dim(0, 0), 0, {}};
  if (shape.tokens * shape.features != in.count(0))
    return in.fail("input size is not tokens x features");
  const DropoutAttributes &attributes = in->dropout();
  if (!(attributes.rate() > 0 && attributes.rate() < 1))
    return in.fail("needs a rate in (0, 1)");
  auto position = shardAxis(in, attributes.shard_axis());
  if (!position)
    return position.takeError();
  if (*position)
    shape.firstFeature = (*position)->coordinate * shape.features;
  shape.key.seed = uint32_t(attributes.seed());
  shape.key.stream = uint32_t(attributes.stream());
  shape.key.threshold = dropoutThreshold(attributes.rate());
  return shape;
}

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

/// A matmul's sizes: `batch` products of op(lhs) [m, k] and op(rhs) [k, n]
/// (rhs shared unless `rhsBatched`); a matrix result from batched operands
/// sums over the batch, which becomes more rows of k. The result is
/// `alpha` times the product, plus the third operand (`addend`, of the
/// result's shape) when there is one: the epilogue twill-fuse-epilogues
/// folded in.
struct MatmulShape {
  int64_t batch, m, n, k;
  bool transposeLhs, transposeRhs, rhsBatched;
  bool hasAddend;
  double alpha;
  int result; // the result's index: after the operands
};

inline llvm::Expected<MatmulShape> matmulShape(const InstructionView &in) {
  DType type = in.floatType();
  int operands = in.numOperands() == 3 ? 3 : 2;
  if (auto error =
          in.expect(operands, 1, std::vector<DType>(operands + 1, type),
                    std::vector<int>(operands + 1, 2)))
    return std::move(error);
  MatmulShape shape;
  shape.hasAddend = operands == 3;
  shape.alpha = in->matmul().alpha();
  shape.result = operands;
  shape.transposeLhs = in->matmul().transpose_lhs();
  shape.transposeRhs = in->matmul().transpose_rhs();
  shape.m = in.dim(0, shape.transposeLhs ? 0 : 1);
  shape.k = in.dim(0, shape.transposeLhs ? 1 : 0);
  shape.n = in.dim(1, shape.transposeRhs ? 1 : 0);
  int64_t rhsK = in.dim(1, shape.transposeRhs ? 0 : 1);
  // The batch from the dims themselves: an empty product (k = 0) still has
  // its rows and columns.
  shape.batch = 1;
  for (int64_t dim : in.shape(0).drop_back(2))
    shape.batch *= dim;
  shape.rhsBatched = in.shape(1).size() > 2;
  if (in.shape(shape.result).size() == 2 && in.shape(0).size() > 2) {
    if (!shape.transposeLhs || shape.transposeRhs)
      return in.fail("sums over batch dims only with transpose_lhs");
    shape.k *= shape.batch;
    rhsK = in.count(1) / std::max<int64_t>(shape.n, 1);
    shape.batch = 1;
    shape.rhsBatched = false;
  }
  if (shape.k != rhsK ||
      in.count(shape.result) != shape.batch * shape.m * shape.n ||
      (shape.rhsBatched && in.count(1) != shape.batch * shape.k * shape.n))
    return in.fail("operand shapes do not multiply");
  if (shape.hasAddend && in.count(2) != in.count(shape.result))
    return in.fail("the addend differs from the result in size");
  return shape;
}

/// The matmul as one row-major GEMM onto `out`: a weight shared by the
/// batch makes the batch rows one tall matrix, other batches are strided;
/// with an addend it accumulates (the backend puts the addend in `out`
/// first, or hands it to its library as C).
inline RowMajorGemm matmulGemm(const MatmulShape &s, const void *lhs,
                               const void *rhs, void *out) {
  RowMajorGemm g;
  g.transA = s.transposeLhs, g.transB = s.transposeRhs;
  g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
  g.a = lhs, g.lda = s.transposeLhs ? s.m : s.k, g.strideA = s.m * s.k;
  g.b = rhs, g.ldb = s.transposeRhs ? s.k : s.n;
  g.strideB = s.rhsBatched ? s.k * s.n : 0;
  g.c = out, g.ldc = s.n, g.strideC = s.m * s.n;
  if (!s.rhsBatched && !s.transposeLhs) {
    g.m *= g.batch;
    g.batch = 1;
  }
  g.alpha = float(s.alpha);
  g.accumulate = s.hasAddend;
  g.floatResult = false; // the result has the operands' type
  return g;
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

/// split's and concat's pieces, as 2-D copies (one per piece, or per
/// piece and block with `blocks` > 1: support/BlockedPieces.h): `rows`
/// rows (one per index of the dims before `dim`) of `bytes`, a row
/// `piecePitch` bytes apart in the piece and `wholePitch` in the whole,
/// starting `pieceOffset` bytes into the piece's rows and `offset` into the
/// whole's.
struct PieceCopy {
  int piece; // its value index
  int64_t rows, bytes, offset, pieceOffset, piecePitch, wholePitch;
};

struct PiecesShape {
  int whole; // the whole value's index
  std::vector<PieceCopy> pieces;
};

inline llvm::Expected<PiecesShape> piecesShape(const InstructionView &in) {
  bool split = in.opcode() == SPLIT;
  int operands = in.numOperands(), results = in.numResults();
  if (split ? operands != 1 || results < 1 : results != 1 || operands < 1)
    return in.fail("puts pieces and one whole value together");
  PiecesShape shape;
  shape.whole = split ? 0 : operands;
  llvm::ArrayRef<int64_t> whole = in.shape(shape.whole);
  int64_t dim = in->split().dim();
  if (dim < 0 || dim >= (int64_t)whole.size())
    return in.fail("its dim is not a dim of the whole");
  int64_t rows = 1, inner = bytesPerElement(in.dtype(shape.whole));
  for (int64_t d = 0; d < dim; ++d)
    rows *= whole[d];
  for (int64_t d = dim + 1; d < (int64_t)whole.size(); ++d)
    inner *= whole[d];
  int first = split ? 1 : 0, count = split ? results : operands;
  std::vector<int64_t> sizes;
  for (int piece = first; piece < first + count; ++piece) {
    llvm::ArrayRef<int64_t> dims = in.shape(piece);
    bool fits =
        in.dtype(piece) == in.dtype(shape.whole) && dims.size() == whole.size();
    for (int64_t d = 0; fits && d < (int64_t)whole.size(); ++d)
      fits = d == dim || dims[d] == whole[d];
    if (!fits)
      return in.fail("a piece differs from the whole beyond its dim");
    sizes.push_back(dims[dim]);
  }
  llvm::Expected<std::vector<PieceRun>> runs =
      blockedPieceRuns(whole[dim], in->split().blocks(), sizes);
  if (!runs)
    return in.fail(llvm::toString(runs.takeError()));
  for (const PieceRun &run : *runs)
    shape.pieces.push_back({first + int(run.piece), rows, run.length * inner,
                            run.wholeStart * inner, run.pieceStart * inner,
                            sizes[run.piece] * inner, whole[dim] * inner});
  return shape;
}

/// A collective's axis and sizes. Along `dim` (all_to_all: the dim it
/// concatenates; `splitDim` the one it splits) blocks are `block` =
/// ceil(whole / size) long; `outer` and `inner` count the elements before
/// and after it.
struct CollectiveShape {
  Communicator *comm;
  std::string axis;
  int64_t size, coordinate;
  DType dtype;
  int64_t dim = 0, splitDim = 0, whole = 0, block = 0, outer = 1, inner = 1;
};

/// Checks a collective (or its start) against its axis: the dtypes it moves
/// (f32 or bf16; i64 counts are summed, i32 positions sliced), its dims,
/// and block sizes.
inline llvm::Expected<CollectiveShape>
collectiveShape(const InstructionView &in) {
  Opcode op = blockingOf(in.opcode());
  std::string axis;
  switch (in->attributes_case()) {
  case Instruction::kAllReduce:
    axis = in->all_reduce().axis();
    break;
  case Instruction::kGather:
    axis = in->gather().axis();
    break;
  case Instruction::kAllToAll:
    axis = in->all_to_all().axis();
    break;
  default:
    return in.fail("is no collective");
  }
  DType dtype = in.dtype(0);
  bool integer = (op == ALL_REDUCE && dtype == I64) ||
                 (op == LOCAL_SLICE && dtype == I32);
  DType expected = integer ? dtype : in.floatType();
  if (auto error = in.expect(1, 1, {expected, expected}, {0, 0}))
    return std::move(error);
  llvm::Expected<Communicator *> comm = in.communicator();
  if (!comm)
    return comm.takeError();
  CollectiveShape shape{*comm, axis, 0, 0, dtype};
  int size = (*comm)->axisSize(shape.axis);
  if (size < 0)
    return in.fail("the mesh has no axis '" + shape.axis + "'");
  shape.size = size;
  shape.coordinate = (*comm)->coordinate(shape.axis);
  if (op == ALL_REDUCE || op == ALL_TO_ALL) {
    if (in.count(0) != in.count(1))
      return in.fail("result size differs from the input's");
    if (op == ALL_REDUCE)
      return shape;
  }
  llvm::ArrayRef<int64_t> inShape = in.shape(0), outShape = in.shape(1);
  int64_t rank = inShape.size();
  auto checkDim = [&](int64_t dim,
                      llvm::StringRef name) -> llvm::Expected<int64_t> {
    if (dim < 0 || dim >= rank || (int64_t)outShape.size() != rank)
      return in.fail(name + " is not a dim of the input and result");
    return dim;
  };
  llvm::Expected<int64_t> dim =
      op == ALL_TO_ALL ? checkDim(in->all_to_all().concat_dim(), "concat_dim")
                       : checkDim(in->gather().dim(), "dim");
  if (!dim)
    return dim.takeError();
  shape.dim = *dim;
  if (op == ALL_TO_ALL) {
    llvm::Expected<int64_t> split =
        checkDim(in->all_to_all().split_dim(), "split_dim");
    if (!split)
      return split.takeError();
    shape.splitDim = *split;
    return shape;
  }
  for (int64_t d = 0; d < rank; ++d)
    if (d < shape.dim)
      shape.outer *= inShape[d];
    else if (d > shape.dim)
      shape.inner *= inShape[d];
  bool gather = op == ALL_GATHER;
  shape.whole = gather ? outShape[shape.dim] : inShape[shape.dim];
  shape.block = (shape.whole + size - 1) / size;
  if ((gather ? inShape[shape.dim] : outShape[shape.dim]) != shape.block)
    return in.fail("block size does not match the axis size");
  return shape;
}

/// attention's or attention_grad's sizes: (query, key, value[, output,
/// grad][, segments]) -> output or (dq, dk, dv), all [batch, seq, heads,
/// headDim].
struct AttentionShape {
  int64_t batch, seq, kvHeads, headDim;
  HeadBlock heads;
  int firstResult; // the operand count: results follow
  double scale;
  bool hasSegments;

  const int32_t *segments(const InstructionView &in) const {
    return hasSegments ? in.data<int32_t>(firstResult - 1) : nullptr;
  }
};

inline llvm::Expected<AttentionShape> attentionShape(const InstructionView &in,
                                                     bool gradient) {
  int inputs = gradient ? 5 : 3, results = gradient ? 3 : 1;
  bool hasSegments = in.numOperands() == inputs + 1;
  DType type = in.floatType();
  std::vector<DType> dtypes(inputs, type);
  std::vector<int> ranks(inputs, 4);
  if (hasSegments) {
    dtypes.push_back(I32);
    ranks.push_back(2);
  }
  dtypes.insert(dtypes.end(), results, type);
  ranks.insert(ranks.end(), results, 4);
  if (auto error = in.expect(inputs + hasSegments, results, dtypes, ranks))
    return std::move(error);
  llvm::ArrayRef<int64_t> q = in.shape(0), k = in.shape(1);
  int first = inputs + hasSegments;
  bool agree = q[0] == k[0] && q[1] == k[1] && q[3] == k[3] &&
               in.shape(2) == k &&
               (!hasSegments || in.count(inputs) == q[0] * q[1]);
  for (int index : {3, 4})
    agree = agree && (!gradient || in.shape(index) == q);
  agree = agree && in.shape(first) == q;
  for (int index = first + 1; index < first + results; ++index)
    agree = agree && in.shape(index) == k;
  if (!agree)
    return in.fail("query, key, value, segment and result shapes do not "
                   "agree");
  llvm::Expected<HeadBlock> heads = headBlock(in, q[2], k[2]);
  if (!heads)
    return heads.takeError();
  return AttentionShape{
      q[0], q[1], k[2], q[3], *heads, first, in->attention().scale(),
      hasSegments};
}

/// rope's or rope_grad's sizes and frequencies' settings: (x, positions)
/// -> result, x [.., heads, headDim] with one position per token.
struct RopeShape {
  int64_t tokens, heads, headDim;
  double theta;
  RopeFrequencyScaling scaling;
};

inline llvm::Expected<RopeShape> ropeShape(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(2, 1, {type, I32, type}, {4, 2, 4}))
    return std::move(error);
  RopeShape shape;
  shape.headDim = in.dim(0, 0);
  shape.heads = in.dim(0, 1);
  shape.tokens =
      in.count(0) / std::max<int64_t>(shape.heads * shape.headDim, 1);
  if (in.count(1) != shape.tokens)
    return in.fail("positions do not match the tokens");
  if (auto error = in.expectSameCount(0, 2))
    return std::move(error);
  const RopeAttributes &rope = in->rope();
  shape.theta = rope.theta();
  shape.scaling.factor = rope.scaling_factor();
  shape.scaling.lowFreqFactor = rope.low_freq_factor();
  shape.scaling.highFreqFactor = rope.high_freq_factor();
  shape.scaling.originalMaxPosition = rope.original_max_position();
  return shape;
}

/// transpose's permutation: out dim i is in dim permutation[i], checked to
/// be a permutation of every dim.
inline llvm::Expected<llvm::ArrayRef<int64_t>>
transposePermutation(const InstructionView &in) {
  DType type = in.floatType();
  if (auto error = in.expect(1, 1, {type, type}, {0, 0}))
    return std::move(error);
  const auto &permutation = in->transpose().permutation();
  llvm::ArrayRef<int64_t> shape = in.shape(0);
  if (permutation.size() != (int)shape.size())
    return in.fail("needs a permutation of every dim");
  std::vector<bool> seen(shape.size(), false);
  for (int64_t dim : permutation) {
    if (dim < 0 || dim >= (int64_t)shape.size() || seen[dim])
      return in.fail("permutation is not a permutation");
    seen[dim] = true;
  }
  if (auto error = in.expectSameCount(0, 1))
    return std::move(error);
  return llvm::ArrayRef<int64_t>(permutation.data(), shape.size());
}

/// adamw (param, grad, exp_avg, exp_avg_sq, lr, grad_scale, step) ->
/// (param, exp_avg, exp_avg_sq): its settings, once the shapes agree.
inline llvm::Expected<AdamWSettings> adamwSettings(const InstructionView &in) {
  if (auto error =
          in.expect(7, 3, {F32, F32, F32, F32, F32, F32, I64, F32, F32, F32},
                    {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}))
    return std::move(error);
  for (int index : {1, 2, 3, 7, 8, 9})
    if (auto error = in.expectSameCount(0, index))
      return std::move(error);
  if (in.count(4) != 1 || in.count(5) != 1 || in.count(6) != 1)
    return in.fail("lr, grad_scale and step must be scalars");
  const AdamWAttributes &adamw = in->adamw();
  return AdamWSettings{adamw.beta1(), adamw.beta2(), adamw.eps(),
                       adamw.weight_decay()};
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_INSTRUCTIONVIEW_H
