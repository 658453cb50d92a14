//===- CudaAttention.h - attention on the GPU -------------------*- C++ -*-===//
//
// attention and attention_grad as ChunkedAttention.h's schedule: cuBLAS
// GEMMs (bf16 or fp32 values, fp32 accumulation) and two row kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAATTENTION_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAATTENTION_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

llvm::Error runAttention(const InstructionView &in, Device &device);
llvm::Error runAttentionGrad(const InstructionView &in, Device &device);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAATTENTION_H
