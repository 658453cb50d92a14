//===- CudaOps.h - the cuda backend's runners, by family -----*- C++ -*-===//
//
// The cuda backend's runners, one file per family (the cpu backend's
// families, cpu/CpuOps.h): each checks its instruction and queues its work
// on the device's streams. Which runner runs an opcode, and whether on
// bf16 values as stored, is its op's ODS entry's word (cudaRunner,
// cudaRunsBf16), generated into CudaRunners.inc.
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

/// Each runner an op's ODS names (cudaRunner), declared from them.
#define TWILL_RUNNER_FUNCTION(function)                                        \
  llvm::Error function(const InstructionView &in, Device &device);
#include "runtime/backend/cuda/CudaRunners.inc"

/// Each opcode's runner, as its op's ODS names it (CudaBackend.cpp).
const Kernels &kernelTable();

/// One row-major GEMM (Gemm.h) of `type` values on cuBLASLt, on the
/// device's stream; with `accumulate` it adds `addend` (C itself when
/// null).
llvm::Error gemm(Device &device, const RowMajorGemm &g, DType type,
                 const void *addend = nullptr);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDAOPS_H
