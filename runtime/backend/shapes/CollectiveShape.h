//===- CollectiveShape.h - a collective's axis and blocks -------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H

#include "runtime/backend/InstructionView.h"

namespace twill {

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

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H
