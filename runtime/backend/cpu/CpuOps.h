//===- CpuOps.h - instructions run outside CpuBackend.cpp -------*- C++ -*-===//
//
// The cpu backend's runners, in the files and families the cuda backend's
// are (cuda/CudaOps.h): each checks its instruction and runs its kernels
// (CpuKernels.h) on fp32 values (the backend widens bf16 ones first).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H

#include "runtime/backend/InstructionView.h"

namespace twill::cpu {

/// embedding, embedding_grad, the rms_norm family, and rope and rope_grad
/// (CpuLayers.cpp).
llvm::Error runEmbedding(const InstructionView &in);
llvm::Error runEmbeddingGrad(const InstructionView &in);
llvm::Error runRmsNormFamily(const InstructionView &in);
llvm::Error runRope(const InstructionView &in);

/// add (floats, or token counts), mul, div, swiglu, scale, sqrt,
/// swiglu_grad; reshape, offload and reload (and their starts: copies),
/// cast, transpose, constant (CpuElementwise.cpp).
llvm::Error runElementwise(const InstructionView &in);
llvm::Error runCopy(const InstructionView &in);
/// dropout; DoRA's row_sum_squares, scale_columns and its gradient
/// (CpuElementwise.cpp).
llvm::Error runDropout(const InstructionView &in);
llvm::Error runColumns(const InstructionView &in);
/// split and concat: each piece's rows copied out of or into the whole's.
llvm::Error runPieces(const InstructionView &in);
llvm::Error runCast(const InstructionView &in);
llvm::Error runTranspose(const InstructionView &in);
llvm::Error runConstant(const InstructionView &in);

/// cross_entropy and cross_entropy_grad, vocab-parallel; linear_cross_entropy
/// and its gradient, tile by tile (CpuCrossEntropy.cpp).
llvm::Error runCrossEntropyFamily(const InstructionView &in);
llvm::Error runLinearCrossEntropy(const InstructionView &in);

/// global_norm and sum_squares; clip_coefficient, lr_schedule and
/// increment; adamw (CpuOptimizer.cpp).
llvm::Error runSquares(const InstructionView &in);
llvm::Error runScalar(const InstructionView &in);
llvm::Error runAdamW(const InstructionView &in);

/// result = alpha op(lhs) op(rhs) (+ addend): one GEMM (CpuMatmul.cpp).
llvm::Error runMatmul(const InstructionView &in);

/// attention and attention_grad as ChunkedAttention.h's schedule
/// (CpuAttention.cpp).
llvm::Error runAttention(const InstructionView &in);
llvm::Error runAttentionGrad(const InstructionView &in);

} // namespace twill::cpu

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
