//===- CudaStartup.cpp - whether this process can use a GPU ---------------===//

#include "runtime/backend/cuda/CudaStartup.h"

#include "runtime/backend/Backend.h"
#include "llvm/Support/FormatVariadic.h"

using namespace twill;
using namespace twill::cuda;

char NoGpuError::ID = 0;

/// CUDA's version number (1000 major + 10 minor) as "major.minor".
static std::string version(int number) {
  return llvm::formatv("{0}.{1}", number / 1000, number % 1000 / 10).str();
}

DeviceCount cuda::judgeDeviceCount(cudaError_t result, int devices,
                                   int driverVersion, int runtimeVersion) {
  if (result == cudaSuccess && devices > 0)
    return {DeviceCount::Use, {}};
  std::string noGpu = "--backend=cuda needs a GPU, and ";
  if (result == cudaSuccess || result == cudaErrorNoDevice)
    return {DeviceCount::NoGpu,
            noGpu + "this machine has none (cudaGetDeviceCount found no "
                    "CUDA-capable device)"};
  // The runtime finds no driver library at all: a machine without NVIDIA's
  // driver, which is one without an NVIDIA GPU to use.
  if (result == cudaErrorInsufficientDriver && driverVersion == 0)
    return {DeviceCount::NoGpu,
            noGpu + "this machine has no NVIDIA driver (libcuda.so.1)"};
  std::string why = llvm::formatv("cudaGetDeviceCount failed with {0} ({1})",
                                  cudaGetErrorName(result),
                                  cudaGetErrorString(result))
                        .str();
  if (result == cudaErrorInsufficientDriver)
    why += llvm::formatv(": the NVIDIA driver supports CUDA {0}, and this "
                         "build needs {1}; update the driver",
                         version(driverVersion), version(runtimeVersion));
  return {DeviceCount::Broken,
          "--backend=cuda cannot use this machine's GPUs: " + why};
}

DeviceCount cuda::countDevices(int &devices) {
  devices = 0;
  cudaError_t result = cudaGetDeviceCount(&devices);
  int driverVersion = 0, runtimeVersion = 0;
  cudaDriverGetVersion(&driverVersion);
  cudaRuntimeGetVersion(&runtimeVersion);
  return judgeDeviceCount(result, devices, driverVersion, runtimeVersion);
}
