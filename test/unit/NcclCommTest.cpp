//===- NcclCommTest.cpp - NCCL where ranks share a GPU --------------------===//
//
// What the cuda backend asks of NCCL before it starts where a node has
// more ranks than GPUs (a mesh tried on one GPU): a clear refusal where
// NCCL cannot run it, and each rank's share of the GPU's CTAs where it can.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/NcclComm.h"

#include <gtest/gtest.h>

using namespace twill;

namespace {

std::string refusal(int ranksPerGpu, int version, const char *enable) {
  llvm::Expected<int> ctas = sharedGpuCtas(ranksPerGpu, version, enable);
  if (ctas)
    return "";
  return llvm::toString(ctas.takeError());
}

TEST(NcclComm, OneRankPerGpuKeepsNcclsDefaults) {
  for (int version : {21805, 22809, 23007})
    for (const char *enable : {(const char *)nullptr, "0", "1"}) {
      llvm::Expected<int> ctas = sharedGpuCtas(1, version, enable);
      ASSERT_TRUE(bool(ctas)) << llvm::toString(ctas.takeError());
      EXPECT_EQ(*ctas, 0);
    }
}

TEST(NcclComm, RanksSharingAGpuNeedNccl230) {
  std::string why = refusal(2, 22809, "1");
  EXPECT_NE(why.find("2 ranks share each GPU"), std::string::npos) << why;
  EXPECT_NE(why.find("NCCL 2.28.9"), std::string::npos) << why;
  EXPECT_NE(why.find("from 2.30 on"), std::string::npos) << why;
}

TEST(NcclComm, RanksSharingAGpuNeedItAllowed) {
  for (const char *enable : {(const char *)nullptr, "0", "yes"})
    EXPECT_NE(refusal(2, 23007, enable).find("NCCL_MULTI_RANK_GPU_ENABLE=1"),
              std::string::npos);
}

TEST(NcclComm, RanksSharingAGpuShareItsCtas) {
  EXPECT_EQ(*sharedGpuCtas(2, 23007, "1"), 4);
  EXPECT_EQ(*sharedGpuCtas(3, 23200, "1"), 2);
  EXPECT_EQ(*sharedGpuCtas(16, 23200, "1"), 1);
}

} // namespace
