//===- CpuMatmul.cpp - matmul as one GEMM; dequantize ---------------------===//

#include "runtime/backend/cpu/CpuOps.h"

#include "runtime/backend/cpu/CpuKernels.h"
#include "runtime/backend/shapes/MatmulShape.h"

using namespace twill;

/// The addend is copied into the result, which the GEMM then adds to (the
/// memory plan may place the result over the addend: then the copy is
/// none).
static llvm::Error runMatmul(const InstructionView &in) {
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
static llvm::Error runDequantizeNf4(const InstructionView &in) {
  llvm::Expected<nf4::Geometry> g = nf4Geometry(in);
  if (!g)
    return g.takeError();
  cpu::dequantizeNf4(in.data<uint8_t>(0), in.data<uint8_t>(1),
                     in.data<float>(2), *in.data<float>(3), *g,
                     in.data<float>(4));
  return llvm::Error::success();
}

static llvm::Error runDequantizeFp8(const InstructionView &in) {
  llvm::Expected<Fp8Shape> shape = fp8Shape(in);
  if (!shape)
    return shape.takeError();
  cpu::dequantizeFp8(in.data<uint8_t>(0), in.data<float>(1), shape->rows,
                     shape->columns, in.data<float>(2));
  return llvm::Error::success();
}

void cpu::addMatmulKernels(Kernels &kernels) {
  kernels.add({MATMUL}, runMatmul);
  kernels.add({DEQUANTIZE_NF4}, runDequantizeNf4);
  kernels.add({DEQUANTIZE_FP8}, runDequantizeFp8);
}
