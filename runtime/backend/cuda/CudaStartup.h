//===- CudaStartup.h - whether this process can use a GPU -------*- C++ -*-===//
//
// What cudaGetDeviceCount's answer means. Only a machine without a GPU (no
// device, or no NVIDIA driver at all) is one the cuda backend cannot run
// on (a NoGpuError, which tests report as skipped); every other failure (a
// driver older than the runtime, a device the process may not use, one not
// ready) is an error that names CUDA's own reason, so a broken GPU never
// looks like an absent one.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_RUNTIME_BACKEND_CUDA_CUDASTARTUP_H
#define TWILL_RUNTIME_BACKEND_CUDA_CUDASTARTUP_H

#include <cuda_runtime.h>

#include <string>

namespace twill::cuda {

struct DeviceCount {
  enum Verdict { Use, NoGpu, Broken } verdict = Use;
  std::string message; // why not, for NoGpu and Broken
};

/// The verdict on cudaGetDeviceCount's `result` and `devices`, given the
/// versions of the driver (cudaDriverGetVersion: 0 where none is
/// installed) and of the runtime this build links.
DeviceCount judgeDeviceCount(cudaError_t result, int devices,
                             int driverVersion, int runtimeVersion);

/// The verdict on this machine, asking CUDA.
DeviceCount countDevices(int &devices);

} // namespace twill::cuda

#endif // TWILL_RUNTIME_BACKEND_CUDA_CUDASTARTUP_H
