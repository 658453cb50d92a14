//===- CudaOps.h - the cuda backend's runners, by family -----*- C++ -*-===//
//
// The cuda backend's runners, one file per family (the cpu backend's
// families, cpu/CpuOps.h): each checks its instruction and queues its work
// on the device's streams, and its file adds it to the backend's table.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H

#include "runtime/backend/Gemm.h"
#include "runtime/backend/InstructionView.h"
#include "runtime/backend/KernelTable.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

/// A runner, and whether it reads and writes bf16 values as they are
/// stored; the others get them widened to fp32 (Device::widened).
struct Kernel {
  llvm::Error (*run)(const InstructionView &, Device &);
  bool bf16 = false;
};
using Kernels = KernelTable<Kernel>;

/// embedding, embedding_grad, the rms_norm family, and rope and rope_grad
/// (CudaLayers.cpp).
void addLayerKernels(Kernels &kernels);
/// add, mul, div, swiglu, geglu, scale, sqrt, swiglu_grad, geglu_grad,
/// softcap and its gradient; reshape, offload and
/// reload (and their starts: copies), split and concat, cast, transpose,
/// constant; dropout; DoRA's row_sum_squares, scale_columns and its
/// gradient; a bias's add_columns and column_sums (CudaElementwise.cpp).
void addElementwiseKernels(Kernels &kernels);
/// cross_entropy and cross_entropy_grad, vocab-parallel; linear_cross_entropy
/// and its gradient: the same kernels on one tile of logits at a time,
/// formed by gemm (CudaCrossEntropy.cpp).
void addCrossEntropyKernels(Kernels &kernels);
/// global_norm and sum_squares; clip_coefficient, lr_schedule and
/// increment; adamw (CudaOptimizer.cpp).
void addOptimizerKernels(Kernels &kernels);
/// matmul: result = alpha op(lhs) op(rhs) (+ addend), one cuBLASLt call,
/// bf16 or fp32 values, fp32 accumulation; the addend is cuBLASLt's C and
/// the result its D, so the epilogue's add reads the addend once and writes
/// nothing more; dequantize, a quantized weight for them (CudaMatmul.cpp).
void addMatmulKernels(Kernels &kernels);
/// attention and attention_grad as cuDNN's fused SDPA where it takes the
/// shape (FusedAttention.h), else ChunkedAttention.h's schedule: cuBLAS
/// GEMMs and two row kernels (CudaAttention.cpp).
void addAttentionKernels(Kernels &kernels);
/// all_gather, reduce_scatter, all_reduce, all_to_all (or their starts)
/// and local_slice through NCCL on the communication stream, in the dtype
/// the values are stored in; a start leaves the collective in flight until
/// its wait (CudaCollectives.cpp).
void addCollectiveKernels(Kernels &kernels);

/// Every family's runners (CudaBackend.cpp).
const Kernels &kernelTable();

/// One row-major GEMM (Gemm.h) of `type` values on cuBLASLt, on the
/// device's stream; with `accumulate` it adds `addend` (C itself when
/// null).
llvm::Error gemm(Device &device, const RowMajorGemm &g, DType type,
                 const void *addend = nullptr);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
