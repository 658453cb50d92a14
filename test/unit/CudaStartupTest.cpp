//===- CudaStartupTest.cpp - a broken GPU is an error, not a skip ---------===//
//
// cudaGetDeviceCount's answers, faked: only a machine with no GPU or no
// NVIDIA driver is one the cuda backend is skipped on.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaStartup.h"

#include <gtest/gtest.h>

using namespace twill::cuda;

namespace {

constexpr int kDriver = 13000, kRuntime = 13000;

TEST(CudaStartup, DevicesAreUsed) {
  EXPECT_EQ(judgeDeviceCount(cudaSuccess, 1, kDriver, kRuntime).verdict,
            DeviceCount::Use);
}

TEST(CudaStartup, NoDeviceOrNoDriverIsNoGpu) {
  for (DeviceCount count :
       {judgeDeviceCount(cudaErrorNoDevice, 0, kDriver, kRuntime),
        judgeDeviceCount(cudaSuccess, 0, kDriver, kRuntime),
        judgeDeviceCount(cudaErrorInsufficientDriver, 0, 0, kRuntime)}) {
    EXPECT_EQ(count.verdict, DeviceCount::NoGpu) << count.message;
    EXPECT_NE(count.message.find("needs a GPU"), std::string::npos);
  }
}

TEST(CudaStartup, AGpuCudaCannotUseIsAnErrorSayingWhy) {
  DeviceCount old =
      judgeDeviceCount(cudaErrorInsufficientDriver, 0, 12020, kRuntime);
  EXPECT_EQ(old.verdict, DeviceCount::Broken);
  EXPECT_NE(old.message.find("cudaErrorInsufficientDriver"), std::string::npos)
      << old.message;
  EXPECT_NE(old.message.find("supports CUDA 12.2, and this build needs 13.0"),
            std::string::npos)
      << old.message;
  for (cudaError_t error :
       {cudaErrorNotPermitted, cudaErrorDevicesUnavailable,
        cudaErrorSystemNotReady, cudaErrorInitializationError,
        cudaErrorUnknown}) {
    DeviceCount count = judgeDeviceCount(error, 0, kDriver, kRuntime);
    EXPECT_EQ(count.verdict, DeviceCount::Broken) << cudaGetErrorName(error);
    EXPECT_EQ(count.message.find("needs a GPU"), std::string::npos);
    EXPECT_NE(count.message.find(cudaGetErrorName(error)), std::string::npos)
        << count.message;
    EXPECT_NE(count.message.find(cudaGetErrorString(error)), std::string::npos)
        << count.message;
  }
}

// This machine's own answer is one of the three, and never a crash.
TEST(CudaStartup, ThisMachineGetsAVerdict) {
  int devices = -1;
  DeviceCount count = countDevices(devices);
  EXPECT_GE(devices, 0);
  EXPECT_EQ(count.verdict == DeviceCount::Use, devices > 0) << count.message;
}

} // namespace
