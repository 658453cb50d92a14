//===- CudaMatmul.h - the matmul on cuBLASLt --------------------*- C++ -*-===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAMATMUL_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAMATMUL_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

/// result = alpha op(lhs) op(rhs) (+ addend): one cuBLASLt call, bf16 or
/// fp32 values, fp32 accumulation; the addend is cuBLASLt's C and the result
/// its D, so the epilogue's add reads the addend once and writes nothing
/// more.
llvm::Error runMatmul(const InstructionView &in, Device &device);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAMATMUL_H
