//===- CudaOps.h - instructions run outside CudaBackend.cpp -----*- C++ -*-===//
//
// The cuda backend's runners, one file per idea: each checks its
// instruction and queues its work on the device's streams.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H

#include "runtime/backend/Gemm.h"
#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

/// embedding, embedding_grad, the rms_norm family, and rope and rope_grad
/// (CudaLayers.cpp).
llvm::Error runEmbedding(const InstructionView &in, Device &device);
llvm::Error runEmbeddingGrad(const InstructionView &in, Device &device);
llvm::Error runRmsNormFamily(const InstructionView &in, Device &device);
llvm::Error runRope(const InstructionView &in, Device &device);

/// add, mul, div, swiglu, scale, sqrt, swiglu_grad; reshape (and offload and
/// reload, and their starts: copies), cast, transpose,
/// constant (CudaElementwise.cpp).
llvm::Error runElementwise(const InstructionView &in, Device &device);
llvm::Error runCopy(const InstructionView &in, Device &device);
/// dropout; DoRA's row_sum_squares, scale_columns and its gradient
/// (CudaElementwise.cpp).
llvm::Error runDropout(const InstructionView &in, Device &device);
llvm::Error runColumns(const InstructionView &in, Device &device);
/// split and concat: 2-D copies of the pieces.
llvm::Error runPieces(const InstructionView &in, Device &device);
llvm::Error runCast(const InstructionView &in, Device &device);
llvm::Error runTranspose(const InstructionView &in, Device &device);
llvm::Error runConstant(const InstructionView &in, Device &device);

/// cross_entropy and cross_entropy_grad, vocab-parallel
/// (CudaCrossEntropy.cpp).
llvm::Error runCrossEntropyFamily(const InstructionView &in, Device &device);
/// linear_cross_entropy and its gradient: the same kernels on one tile of
/// logits at a time, formed by gemm (CudaCrossEntropy.cpp).
llvm::Error runLinearCrossEntropy(const InstructionView &in, Device &device);

/// global_norm and sum_squares; sqrt, clip_coefficient, lr_schedule and
/// increment; adamw (CudaOptimizer.cpp).
llvm::Error runSquares(const InstructionView &in, Device &device);
llvm::Error runScalar(const InstructionView &in, Device &device);
llvm::Error runAdamW(const InstructionView &in, Device &device);

/// result = alpha op(lhs) op(rhs) (+ addend): one cuBLASLt call, bf16 or
/// fp32 values, fp32 accumulation; the addend is cuBLASLt's C and the result
/// its D, so the epilogue's add reads the addend once and writes nothing
/// more (CudaMatmul.cpp).
llvm::Error runMatmul(const InstructionView &in, Device &device);
/// One row-major GEMM (Gemm.h) of `type` values on cuBLASLt, on the
/// device's stream; with `accumulate` it adds `addend` (C itself when
/// null).
llvm::Error gemm(Device &device, const RowMajorGemm &g, DType type,
                 const void *addend = nullptr);

/// attention and attention_grad as ChunkedAttention.h's schedule: cuBLAS
/// GEMMs and two row kernels (CudaAttention.cpp).
llvm::Error runAttention(const InstructionView &in, Device &device);
llvm::Error runAttentionGrad(const InstructionView &in, Device &device);

/// all_gather, reduce_scatter, all_reduce, all_to_all (or their starts)
/// and local_slice through NCCL on the communication stream, in the dtype
/// the values are stored in (CudaCollectives.cpp); a start leaves the
/// collective in flight until its wait (runWait).
llvm::Error runCollective(const InstructionView &in, Device &device);
llvm::Error runWait(const InstructionView &in, Device &device);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
