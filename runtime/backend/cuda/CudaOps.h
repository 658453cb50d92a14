//===- CudaOps.h - instructions run outside CudaBackend.cpp -----*- C++ -*-===//
//
// The cuda backend's runners that have files of their own: each checks its
// instruction and queues its work on the device's streams.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

/// result = alpha op(lhs) op(rhs) (+ addend): one cuBLASLt call, bf16 or
/// fp32 values, fp32 accumulation; the addend is cuBLASLt's C and the result
/// its D, so the epilogue's add reads the addend once and writes nothing
/// more (CudaMatmul.cpp).
llvm::Error runMatmul(const InstructionView &in, Device &device);

/// attention and attention_grad as ChunkedAttention.h's schedule: cuBLAS
/// GEMMs and two row kernels (CudaAttention.cpp).
llvm::Error runAttention(const InstructionView &in, Device &device);
llvm::Error runAttentionGrad(const InstructionView &in, Device &device);

/// all_gather, reduce_scatter, all_reduce, all_to_all and local_slice
/// through NCCL on the communication stream, in the dtype the values are
/// stored in (CudaCollectives.cpp).
llvm::Error runCollective(const InstructionView &in, Device &device);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
