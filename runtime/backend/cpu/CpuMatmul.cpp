//===- CpuMatmul.cpp - matmul as one GEMM; dequantize; round to FP8 -------===//
//
// A quantized matmul forms its weight a panel of rows at a time (at most
// kPanelBytes of fp32, a few of the GEMM's own blocks) and multiplies by
// each: no full-precision copy of a weight is ever made. A product whose
// lhs round_to_fp8 rounded is the same GEMM: its values are those the FP8
// codes and scales stand for.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/MatmulShape.h"
#include "runtime/executable/BFloat16.h"

using namespace twill;

/// The addend is copied into the result, which the GEMM then adds to (the
/// memory plan may place the result over the addend: then the copy is
/// none).
llvm::Error cpu::runMatmul(const InstructionView &in) {
  llvm::Expected<MatmulShape> shape = matmulShape(in);
  if (!shape)
    return shape.takeError();
  float *out = in.data<float>(shape->result);
  if (shape->hasAddend)
    cpu::copy(in.data<float>(2), out, in.count(2));
  cpu::gemm(matmulGemm(*shape, in.data<float>(0), in.data<float>(1), out));
  return llvm::Error::success();
}

/// dequantize: the weight's block in fp32 (the backend rounds a bf16
/// result once).
llvm::Error cpu::runDequantizeNf4(const InstructionView &in) {
  llvm::Expected<nf4::Geometry> g = nf4Geometry(in);
  if (!g)
    return g.takeError();
  cpu::dequantizeNf4(in.data<uint8_t>(0), in.data<uint8_t>(1),
                     in.data<float>(2), *in.data<float>(3), *g,
                     in.data<float>(4));
  return llvm::Error::success();
}

llvm::Error cpu::runDequantizeFp8(const InstructionView &in) {
  llvm::Expected<Fp8Shape> shape = fp8Shape(in);
  if (!shape)
    return shape.takeError();
  cpu::dequantizeFp8(in.data<uint8_t>(0), in.data<float>(1), shape->rows,
                     shape->columns, in.data<float>(2));
  return llvm::Error::success();
}

/// round_to_fp8: the blocks rounded in fp32 (the backend rounds a bf16
/// result once).
llvm::Error cpu::runRoundToFp8(const InstructionView &in) {
  llvm::Expected<RoundToFp8Shape> s = roundToFp8Shape(in);
  if (!s)
    return s.takeError();
  cpu::roundToFp8(in.data<float>(0), s->rows, s->columns, s->block,
                  in.data<float>(1));
  return llvm::Error::success();
}

/// The weight's rows [first, first + count) in fp32 into `panel`, as the
/// dequantize would form them: rounded to bf16 where the product is in
/// bf16 (the backend widens its bf16 values).
static void formRows(const InstructionView &in, const QuantizedMatmulShape &s,
                     int64_t first, int64_t count, float *panel) {
  if (s.nf4) {
    cpu::dequantizeNf4(in.data<uint8_t>(1) + first * (s.columns / 2),
                       in.data<uint8_t>(2) +
                           first * (s.columns / s.geometry.blockSize),
                       in.data<float>(3), *in.data<float>(4),
                       nf4Rows(s.geometry, first, count), panel);
  } else {
    cpu::dequantizeFp8(in.data<uint8_t>(1) + first * s.columns,
                       in.data<float>(2) + first, count, s.columns, panel);
  }
  if (in.info(0).dtype() == BF16)
    for (int64_t i = 0; i < count * s.columns; ++i)
      panel[i] = bf16ToFloat(floatToBF16(panel[i]));
}

llvm::Error cpu::runQuantizedMatmul(const InstructionView &in) {
  constexpr int64_t kPanelBytes = 8 << 20;
  llvm::Expected<QuantizedMatmulShape> s = quantizedMatmulShape(in);
  if (!s)
    return s.takeError();
  const MatmulShape &p = s->product;
  float *out = in.data<float>(p.result);
  cpu::panelProduct(
      s->rows, s->columns, panelRows(*s, kPanelBytes, sizeof(float)),
      p.hasAddend ? in.data<float>(1 + s->parts) : nullptr, out,
      in.count(p.result),
      [&](int64_t first, int64_t count, float *panel) {
        formRows(in, *s, first, count, panel);
      },
      [&](int64_t first, int64_t count, const float *panel) {
        return panelGemm(*s, first, count, in.data<float>(0), panel, out,
                         sizeof(float));
      });
  return llvm::Error::success();
}
