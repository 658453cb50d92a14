//===- CpuOps.h - the cpu backend's runners, by family ----------*- C++ -*-===//
//
// Each family's file (the families and files of the cuda backend's,
// cuda/CudaOps.h) writes its runners and adds them to the backend's table:
// each checks its instruction and runs its kernels (CpuKernels.h) on fp32
// values (the backend widens bf16 ones first).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
#define TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/KernelTable.h"

namespace twill::cpu {

using Kernel = llvm::Error (*)(const InstructionView &);
using Kernels = KernelTable<Kernel>;

/// embedding, embedding_grad, the rms_norm family, and rope and rope_grad
/// (CpuLayers.cpp).
void addLayerKernels(Kernels &kernels);
/// add (floats, or token counts), mul, div, swiglu, geglu, scale, sqrt,
/// swiglu_grad, geglu_grad, softcap and its gradient; reshape, offload and
/// reload (and their starts: copies), split and concat, cast, transpose,
/// constant; dropout; DoRA's row_sum_squares, scale_columns and its gradient; a
/// bias's add_columns and column_sums (CpuElementwise.cpp).
void addElementwiseKernels(Kernels &kernels);
/// cross_entropy and cross_entropy_grad, vocab-parallel; linear_cross_entropy
/// and its gradient, tile by tile (CpuCrossEntropy.cpp).
void addCrossEntropyKernels(Kernels &kernels);
/// global_norm and sum_squares; clip_coefficient, lr_schedule and
/// increment; adamw (CpuOptimizer.cpp).
void addOptimizerKernels(Kernels &kernels);
/// matmul: one GEMM; dequantize, a quantized weight for one
/// (CpuMatmul.cpp).
void addMatmulKernels(Kernels &kernels);
/// attention and attention_grad as ChunkedAttention.h's schedule
/// (CpuAttention.cpp).
void addAttentionKernels(Kernels &kernels);
/// local_slice, which only slices (CpuCollectives.cpp).
void addCollectiveKernels(Kernels &kernels);

/// Every family's runners (CpuBackend.cpp).
const Kernels &kernelTable();
/// The collectives, their starts and waits: CpuCollectives runs them, not
/// a kernel of the table.
bool runByCollectives(Opcode opcode);

} // namespace twill::cpu

#endif // TWILL_RUNTIME_BACKEND_CPU_CPUOPS_H
