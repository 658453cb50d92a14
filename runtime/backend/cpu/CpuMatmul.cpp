//===- CpuMatmul.cpp - matmul as one GEMM ---------------------------------===//

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

void cpu::addMatmulKernels(Kernels &kernels) {
  kernels.add({MATMUL}, runMatmul);
}
