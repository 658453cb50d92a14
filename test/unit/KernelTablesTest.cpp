//===- KernelTablesTest.cpp - every opcode has a runner in each backend ---===//
//
// The backends' runners are added by family (cpu/CpuOps.h, cuda/CudaOps.h),
// not in a switch the compiler checks; the Opcode enum is the one list each
// table is checked against here. The cuda table is built where CUDA is (CI
// too): it holds only function pointers, so no GPU is needed.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuOps.h"
#if TWILL_CUDA_BACKEND
#include "runtime/backend/cuda/CudaOps.h"
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using namespace twill;
using ::testing::IsEmpty;

namespace {

std::vector<std::string> names(const std::vector<Opcode> &opcodes) {
  std::vector<std::string> result;
  for (Opcode opcode : opcodes)
    result.push_back(opcodeName(opcode));
  return result;
}

bool none(Opcode) { return false; }

TEST(KernelTables, CpuRunsEveryOpcode) {
  EXPECT_THAT(names(cpu::kernelTable().missing(cpu::runByCollectives)),
              IsEmpty());
  // What CpuCollectives runs has no kernel of the table.
  EXPECT_EQ(cpu::kernelTable().find(ALL_GATHER_START), nullptr);
  EXPECT_NE(cpu::kernelTable().find(LOCAL_SLICE), nullptr);
}

TEST(KernelTables, AMissingKernelIsNamed) {
  cpu::Kernels kernels;
  cpu::addMatmulKernels(kernels);
  cpu::addAttentionKernels(kernels);
  std::vector<std::string> missing = names(kernels.missing(none));
  // matmul, the quantized matmul, the two dequantizes and the rounding to
  // FP8, attention and its gradient.
  EXPECT_EQ(missing.size(), allOpcodes().size() - 7);
  EXPECT_THAT(missing, ::testing::Not(::testing::Contains("matmul")));
  EXPECT_THAT(missing, ::testing::Not(::testing::Contains("dequantize_nf4")));
  EXPECT_THAT(missing, ::testing::Not(::testing::Contains("quantized_matmul")));
  EXPECT_THAT(missing, ::testing::Contains("rms_norm_grad"));
  EXPECT_EQ(kernels.find(OPCODE_UNSPECIFIED), nullptr);
  EXPECT_EQ(kernels.find(Opcode(Opcode_MAX + 1)), nullptr);
}

#if TWILL_CUDA_BACKEND
TEST(KernelTables, CudaRunsEveryOpcode) {
  EXPECT_THAT(names(cuda::kernelTable().missing(none)), IsEmpty());
}
#endif

} // namespace
