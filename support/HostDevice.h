//===- HostDevice.h - functions both backends compile -----------*- C++ -*-===//
//
// A function marked TWILL_HOST_DEVICE is compiled for the host and, under
// nvcc, for the GPU too: the scalar math the cpu and cuda backends share is
// written once (ElementMath.h, Dpo.h, Nf4.h, Fp8.h, Dropout.h, and the
// runtime's Blocks.h and ChunkedAttention.h).
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_SUPPORT_HOSTDEVICE_H
#define TWILL_SUPPORT_HOSTDEVICE_H

#ifdef __CUDACC__
#define TWILL_HOST_DEVICE __host__ __device__
#else
#define TWILL_HOST_DEVICE
#endif

#endif // TWILL_SUPPORT_HOSTDEVICE_H
