//===- CudaElementwise.cpp - elementwise ops and layouts ------------------===//
//
// Ops over values of one size, reshapes, casts, transposes and constants
// (CudaElementwiseKernels.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaOps.h"

#include "runtime/backend/cuda/CudaKernels.h"
#include "runtime/backend/shapes/ElementwiseShapes.h"

#include <optional>

using namespace twill;

/// Elementwise ops: operands and results of one size.
llvm::Error cuda::runElementwise(const InstructionView &in, Device &device) {
  Opcode op = in.opcode();
  int operands = in.numOperands(), results = in.numResults();
  // Token counts (a tiled loss's tiles', or their sequences') add as
  // integers.
  if (op == ADD && operands == 2 && in.dtype(0) == I64) {
    if (auto error = in.expect(2, 1, {I64, I64, I64}))
      return error;
    if (auto error = checkShapeRule(in))
      return error;
    if (int64_t count = in.count(0))
      cuda::addCounts(in.data<int64_t>(0), in.data<int64_t>(1),
                      in.data<int64_t>(2), count, device.stream);
    return llvm::Error::success();
  }
  if (auto error = checkShapeRule(in))
    return error;
  DType type = in.floatType();
  bool bf16 = type == BF16;
  if (auto error = in.expect(operands, results, type))
    return error;
  int64_t count = in.count(0);
  if (op == SCALE) {
    cuda::scale(in.data<void>(0), in->scale().factor(), in.data<void>(1), count,
                bf16, device.stream);
    return llvm::Error::success();
  }
  if (op == SQRT) {
    cuda::squareRoot(in.data<void>(0), in.data<void>(1), count, bf16,
                     device.stream);
    return llvm::Error::success();
  }
  if (op == SOFTCAP || op == SOFTCAP_GRAD) {
    bool grad = op == SOFTCAP_GRAD;
    cuda::softcap(in.data<void>(0), grad ? in.data<void>(1) : nullptr,
                  in->softcap().cap(), in.data<void>(grad ? 2 : 1), count, bf16,
                  device.stream);
    return llvm::Error::success();
  }
  if (op == SWIGLU_GRAD || op == GEGLU_GRAD || op == SIGMOID_GATE_GRAD) {
    cuda::gatedGrad(op == SWIGLU_GRAD  ? cuda::Gated::Swiglu
                    : op == GEGLU_GRAD ? cuda::Gated::Geglu
                                       : cuda::Gated::Sigmoid,
                    in.data<void>(0), in.data<void>(1), in.data<void>(2),
                    in.data<void>(3), in.data<void>(4), count, bf16,
                    device.stream);
    return llvm::Error::success();
  }
  std::optional<cuda::Binary> binary;
  if (op == ADD)
    binary = cuda::Binary::Add;
  else if (op == MUL)
    binary = cuda::Binary::Mul;
  else if (op == DIV)
    binary = cuda::Binary::Div;
  else if (op == SWIGLU)
    binary = cuda::Binary::Swiglu;
  else if (op == GEGLU)
    binary = cuda::Binary::Geglu;
  else if (op == SIGMOID_GATE)
    binary = cuda::Binary::SigmoidGate;
  if (!binary)
    return in.fail("is no elementwise op");
  cuda::binary(*binary, in.data<void>(0), in.data<void>(1), in.data<void>(2),
               count, bf16, device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runDropout(const InstructionView &in, Device &device) {
  llvm::Expected<DropoutShape> shape = dropoutShape(in);
  if (!shape)
    return shape.takeError();
  cuda::dropout(in.data<void>(0), in.data<int32_t>(1), in.data<int64_t>(2),
                shape->tokens, shape->features, shape->firstFeature, shape->key,
                in->dropout().rate(), in.data<void>(3), in.floatType() == BF16,
                device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runColumns(const InstructionView &in, Device &device) {
  llvm::Expected<ColumnsShape> shape = columnsShape(in);
  if (!shape)
    return shape.takeError();
  auto [rows, columns] = *shape;
  bool bf16 = in.floatType() == BF16;
  if (in.opcode() == ROW_SUM_SQUARES)
    cuda::rowSumSquares(in.data<void>(0), rows, columns, in.data<void>(1), bf16,
                        device.stream);
  else if (in.opcode() == SCALE_COLUMNS)
    cuda::scaleColumns(in.data<void>(0), in.data<void>(1), rows, columns,
                       in.data<void>(2), bf16, device.stream);
  else if (in.opcode() == ADD_COLUMNS)
    cuda::addColumns(in.data<void>(0), in.data<void>(1), rows, columns,
                     in.data<void>(2), bf16, device.stream);
  else if (in.opcode() == COLUMN_SUMS)
    cuda::columnSums(in.data<void>(0), rows, columns, in.data<void>(1), bf16,
                     device.stream);
  else
    cuda::scaleColumnsGrad(in.data<void>(0), in.data<void>(1), in.data<void>(2),
                           rows, columns, in.data<void>(3), in.data<void>(4),
                           bf16, device.stream);
  return llvm::Error::success();
}

/// reshape, offload and reload: the same bytes, whatever their dtype, in
/// device memory or between it and the host arena (pinned: the copy is
/// the GPU's DMA). Blocking forms run in stream order; offload_start and
/// reload_start on the copy stream, once the compute stream has made the
/// input, in flight until their wait (runWait), so that a layer's input
/// goes out, or comes back, while other layers compute.
llvm::Error cuda::runCopy(const InstructionView &in, Device &device) {
  if (in.numOperands() != 1 || in.numResults() != 1 ||
      in.dtype(0) != in.dtype(1))
    return in.fail("expects one value and a result of its dtype");
  if (auto error = in.expectSameCount(0, 1))
    return error;
  size_t bytes = in.count(0) * bytesPerElement(in.dtype(0));
  auto copy = [&](cudaStream_t stream) {
    return checkCuda(cudaMemcpyAsync(in.data<void>(1), in.data<void>(0), bytes,
                                     cudaMemcpyDefault, stream),
                     "cudaMemcpyAsync");
  };
  if (!isStart(in.opcode()))
    return copy(device.stream);
  return device.launch(in.bufferId(1), device.freeFlightSlot(), copy,
                       device.copyStream);
}

/// split and concat: each piece (or piece of a block) one 2-D copy out of
/// or into the whole.
llvm::Error cuda::runPieces(const InstructionView &in, Device &device) {
  llvm::Expected<PiecesShape> shape = piecesShape(in);
  if (!shape)
    return shape.takeError();
  bool split = in.opcode() == SPLIT;
  auto *whole = in.data<char>(shape->whole);
  for (const PieceCopy &copy : shape->pieces) {
    char *piece = in.data<char>(copy.piece) + copy.pieceOffset;
    char *inWhole = whole + copy.offset;
    if (auto error = checkCuda(
            split ? cudaMemcpy2DAsync(piece, copy.piecePitch, inWhole,
                                      copy.wholePitch, copy.bytes, copy.rows,
                                      cudaMemcpyDeviceToDevice, device.stream)
                  : cudaMemcpy2DAsync(inWhole, copy.wholePitch, piece,
                                      copy.piecePitch, copy.bytes, copy.rows,
                                      cudaMemcpyDeviceToDevice, device.stream),
            "cudaMemcpy2DAsync"))
      return error;
  }
  return llvm::Error::success();
}

/// cast from a float or integer dtype to a float one.
llvm::Error cuda::runCast(const InstructionView &in, Device &device) {
  if (in.numOperands() != 1 || in.numResults() != 1)
    return in.fail("expects one value and one result");
  if (auto error = checkShapeRule(in))
    return error;
  DType from = in.dtype(0), to = in.dtype(1);
  std::optional<cuda::CastSource> source;
  switch (from) {
  case F32:
    source = cuda::CastSource::F32;
    break;
  case BF16:
    source = cuda::CastSource::BF16;
    break;
  case I32:
    source = cuda::CastSource::I32;
    break;
  case I64:
    source = cuda::CastSource::I64;
    break;
  default:
    break;
  }
  if ((to != F32 && to != BF16) || !source)
    return in.fail("casts floats and integers to f32 or bf16 only");
  cuda::cast(in.data<void>(0), *source, in.data<void>(1), to == BF16,
             in.count(0), device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runTranspose(const InstructionView &in, Device &device) {
  llvm::Expected<llvm::ArrayRef<int64_t>> permutation =
      transposePermutation(in);
  if (!permutation)
    return permutation.takeError();
  if (permutation->size() > 8)
    return in.fail("transposes at most 8 dims");
  cuda::transpose(in.data<void>(0), in.shape(0).data(), permutation->data(),
                  permutation->size(), in.data<void>(1), in.floatType() == BF16,
                  device.stream);
  return llvm::Error::success();
}

llvm::Error cuda::runConstant(const InstructionView &in, Device &device) {
  DType type = in.floatType();
  if (auto error = in.expect(0, 1, {type}))
    return error;
  cuda::fill(in.data<void>(0), in.count(0), float(in->constant().value()),
             type == BF16, device.stream);
  return llvm::Error::success();
}
