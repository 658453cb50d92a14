//===- CollectiveShape.h - a collective's axis and blocks -------*- C++ -*-===//
//
// The decoders of one op family (the backends' runners of that family
// share them): each checks its instructions' operands against each other
// before a kernel touches memory.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H
#define TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H

#include "opmodel/Shapes.h"
#include "runtime/backend/InstructionView.h"

#include <optional>

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

/// The twill::shapes::Collective a blocking collective's opcode is (its
/// ODS's `collective`, proto/OpTable.inc).
inline std::optional<shapes::Collective> collectiveKindOf(Opcode op) {
  switch (op) {
#define TWILL_OPCODE_COLLECTIVE(opcode, kind)                                  \
  case opcode:                                                                 \
    return shapes::Collective::kind;
#include "proto/OpTable.inc"
  default:
    return std::nullopt;
  }
}

/// Checks a collective (or its start) against its axis: the dtypes it moves
/// (f32 or bf16; i64 counts are summed, i32 positions sliced, u8 bytes
/// gathered and sliced), its dims,
/// and block sizes.
inline llvm::Expected<CollectiveShape>
collectiveShape(const InstructionView &in) {
  Opcode op = blockingOf(in.opcode());
  using shapes::Collective;
  std::optional<Collective> known = collectiveKindOf(op);
  if (!known)
    return in.fail("is no collective");
  Collective kind = *known;
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
  // Bytes (a quantized weight's) are gathered and sliced, never summed.
  bool bytes = dtype == U8 && (op == ALL_GATHER || op == LOCAL_SLICE);
  bool integer = bytes || (op == ALL_REDUCE && dtype == I64) ||
                 (op == LOCAL_SLICE && dtype == I32);
  DType expected = integer ? dtype : in.floatType();
  if (auto error = in.expect(1, 1, {expected, expected}))
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
  if (kind == Collective::AllToAll) {
    shape.dim = in->all_to_all().concat_dim();
    shape.splitDim = in->all_to_all().split_dim();
  } else if (kind != Collective::AllReduce) {
    shape.dim = in->gather().dim();
  }
  llvm::ArrayRef<int64_t> inShape = in.shape(0), outShape = in.shape(1);
  if (auto error =
          in.check(shapes::collective(kind, inShape, outShape, shape.dim,
                                      shape.splitDim, size, shape.axis)))
    return std::move(error);
  if (kind == Collective::AllReduce || kind == Collective::AllToAll)
    return shape;
  for (int64_t d = 0; d < int64_t(inShape.size()); ++d)
    if (d < shape.dim)
      shape.outer *= inShape[d];
    else if (d > shape.dim)
      shape.inner *= inShape[d];
  shape.whole =
      kind == Collective::AllGather ? outShape[shape.dim] : inShape[shape.dim];
  shape.block = (shape.whole + size - 1) / size;
  return shape;
}

} // namespace twill

#endif // TWILL_RUNTIME_BACKEND_SHAPES_COLLECTIVESHAPE_H
