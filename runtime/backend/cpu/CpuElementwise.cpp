//===- CpuElementwise.cpp - elementwise ops and layouts -------------------===//
//
// Ops over values of one size, copies, reshapes, casts, transposes and
// constants; dropout and DoRA's column scales (CpuKernels.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/ElementwiseShapes.h"

#include <cmath>
#include <cstring>

using namespace twill;

/// Elementwise ops: operands and results of one size.
llvm::Error cpu::runElementwise(const InstructionView &in) {
  Opcode op = in.opcode();
  int operands = in.numOperands(), results = in.numResults();
  // Token counts (a tiled loss's tiles', or their sequences') add as
  // integers.
  if (op == ADD && operands == 2 && results == 1 && in.dtype(0) == I64) {
    if (auto error = in.expect(2, 1, {I64, I64, I64}))
      return error;
    if (auto error = checkShapeRule(in))
      return error;
    for (int64_t i = 0; i < in.count(0); ++i)
      in.data<int64_t>(2)[i] = in.data<int64_t>(0)[i] + in.data<int64_t>(1)[i];
    return llvm::Error::success();
  }
  if (auto error = checkShapeRule(in))
    return error;
  if (auto error = in.expect(operands, results, F32))
    return error;
  int64_t count = in.count(0);
  switch (op) {
  case SCALE:
    cpu::scale(in.data<float>(0), in->scale().factor(), in.data<float>(1),
               count);
    break;
  case SOFTCAP:
    cpu::softcap(in.data<float>(0), in->softcap().cap(), in.data<float>(1),
                 count);
    break;
  case SOFTCAP_GRAD:
    cpu::softcapGrad(in.data<float>(0), in.data<float>(1), in->softcap().cap(),
                     in.data<float>(2), count);
    break;
  case SQRT: {
    const float *x = in.data<float>(0);
    float *out = in.data<float>(1);
    for (int64_t i = 0; i < count; ++i)
      out[i] = std::sqrt(x[i]);
    break;
  }
  case SWIGLU_GRAD:
  case GEGLU_GRAD:
  case SIGMOID_GATE_GRAD:
    (op == SWIGLU_GRAD  ? cpu::swigluGrad
     : op == GEGLU_GRAD ? cpu::gegluGrad
                        : cpu::sigmoidGateGrad)(
        in.data<float>(0), in.data<float>(1), in.data<float>(2),
        in.data<float>(3), in.data<float>(4), count);
    break;
  case ADD:
  case MUL:
  case DIV:
  case SWIGLU:
  case GEGLU:
  case SIGMOID_GATE: {
    auto compute = op == ADD      ? cpu::add
                   : op == MUL    ? cpu::mul
                   : op == DIV    ? cpu::div
                   : op == SWIGLU ? cpu::swiglu
                   : op == GEGLU  ? cpu::geglu
                                  : cpu::sigmoidGate;
    compute(in.data<float>(0), in.data<float>(1), in.data<float>(2), count);
    break;
  }
  default:
    return in.fail("is no elementwise op");
  }
  return llvm::Error::success();
}

/// reshape, offload and reload: the value copied as it is (between the
/// arenas, for the last two).
llvm::Error cpu::runCopy(const InstructionView &in) {
  if (in.numOperands() != 1 || in.numResults() != 1 ||
      in.dtype(0) != in.dtype(1) || in.count(0) != in.count(1))
    return in.fail("copies one value into one of its dtype and size");
  if (in.dtype(0) == F32)
    cpu::copy(in.data<float>(0), in.data<float>(1), in.count(0));
  else
    std::memcpy(in.data<std::byte>(1), in.data<std::byte>(0),
                in.count(0) * bytesPerElement(in.dtype(0)));
  return llvm::Error::success();
}

llvm::Error cpu::runDropout(const InstructionView &in) {
  llvm::Expected<DropoutShape> shape = dropoutShape(in);
  if (!shape)
    return shape.takeError();
  shape->key.microBatch = uint64_t(*in.data<int64_t>(2));
  cpu::dropout(in.data<float>(0), in.data<int32_t>(1), shape->tokens,
               shape->features, shape->firstFeature, shape->key,
               in->dropout().rate(), in.data<float>(3));
  return llvm::Error::success();
}

/// row_sum_squares; scale_columns (input, scale -> result) and its gradient
/// (input, scale, grad -> the input's, the scale's); add_columns (input,
/// bias -> result) and column_sums (input -> result).
llvm::Error cpu::runColumns(const InstructionView &in) {
  llvm::Expected<ColumnsShape> shape = columnsShape(in);
  if (!shape)
    return shape.takeError();
  auto [rows, columns] = *shape;
  if (in.opcode() == ROW_SUM_SQUARES)
    cpu::rowSumSquares(in.data<float>(0), rows, columns, in.data<float>(1));
  else if (in.opcode() == SCALE_COLUMNS)
    cpu::scaleColumns(in.data<float>(0), in.data<float>(1), rows, columns,
                      in.data<float>(2));
  else if (in.opcode() == ADD_COLUMNS)
    cpu::addColumns(in.data<float>(0), in.data<float>(1), rows, columns,
                    in.data<float>(2));
  else if (in.opcode() == COLUMN_SUMS)
    cpu::columnSums(in.data<float>(0), rows, columns, in.data<float>(1));
  else
    cpu::scaleColumnsGrad(in.data<float>(0), in.data<float>(1),
                          in.data<float>(2), rows, columns, in.data<float>(3),
                          in.data<float>(4));
  return llvm::Error::success();
}

llvm::Error cpu::runPieces(const InstructionView &in) {
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

llvm::Error cpu::runCast(const InstructionView &in) {
  DType from = in.dtype(0);
  if (in.dtype(1) != F32 || (from != F32 && from != I32 && from != I64))
    return in.fail("the cpu backend casts floats, i32 and i64 to floats only");
  if (auto error = checkShapeRule(in))
    return error;
  float *out = in.data<float>(1);
  for (int64_t i = 0; i < in.count(0); ++i)
    out[i] = from == F32   ? in.data<float>(0)[i]
             : from == I32 ? float(in.data<int32_t>(0)[i])
                           : float(in.data<int64_t>(0)[i]);
  return llvm::Error::success();
}

llvm::Error cpu::runTranspose(const InstructionView &in) {
  llvm::Expected<llvm::ArrayRef<int64_t>> permutation =
      transposePermutation(in);
  if (!permutation)
    return permutation.takeError();
  cpu::transpose(in.data<float>(0), in.shape(0).data(), permutation->data(),
                 in.shape(0).size(), in.data<float>(1));
  return llvm::Error::success();
}

llvm::Error cpu::runConstant(const InstructionView &in) {
  if (auto error = in.expect(0, 1, {F32}))
    return error;
  cpu::fill(in.data<float>(0), in.count(0), in->constant().value());
  return llvm::Error::success();
}
