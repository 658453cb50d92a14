//===- CudaCollectives.h - the collectives on the GPU -----------*- C++ -*-===//
//
// all_gather, reduce_scatter, all_reduce, all_to_all and local_slice through
// NCCL on the communication stream (Device::communicate), in the dtype the
// values are stored in.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDACOLLECTIVES_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDACOLLECTIVES_H

#include "runtime/backend/InstructionView.h"
#include "runtime/backend/cuda/CudaDevice.h"

namespace twill::cuda {

llvm::Error runCollective(const InstructionView &in, Device &device);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDACOLLECTIVES_H
