//===- FusedAttentionTest.cpp - attention's shapes as cuDNN's graphs ------===//
//
// What can be checked of cuDNN's fused attention without a GPU: which
// shapes it takes, how Twill's [batch, seq, heads, headDim] values and a
// rank's block of query heads map onto its graphs, and that cuDNN's host
// side validates every graph for Hopper (sm 90). Its values are the
// conformance suite's, on a GPU (twill-conformance --backend=cuda).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/FusedAttention.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace twill;

namespace {

constexpr int kHopper = 90;

AttentionShape shape(int64_t batch, int64_t seq, HeadBlock heads,
                     int64_t kvHeads, int64_t headDim, int64_t window = 0,
                     double softcap = 0, bool segments = false) {
  return AttentionShape{
      batch,    seq,
      kvHeads,  headDim,
      heads,    /*firstResult=*/3,
      segments, {1 / std::sqrt(double(headDim)), window, softcap}};
}

SdpaProblem fusedOrFail(const AttentionShape &of) {
  llvm::Expected<SdpaProblem> problem = sdpaProblem(of, /*bf16=*/true);
  if (!problem) {
    ADD_FAILURE() << llvm::toString(problem.takeError());
    return {};
  }
  return *problem;
}

std::string whyNot(const AttentionShape &of, bool bf16 = true) {
  llvm::Expected<SdpaProblem> problem = sdpaProblem(of, bf16);
  if (problem)
    return "";
  return llvm::toString(problem.takeError());
}

void expectValid(const SdpaProblem &problem) {
  llvm::Error error = validateSdpaGraphs(problem, kHopper);
  EXPECT_FALSE(error) << llvm::toString(std::move(error));
}

TEST(FusedAttention, Llama8BReadsTheValuesInPlace) {
  SdpaProblem p = fusedOrFail(shape(1, 4096, HeadBlock::whole(32), 8, 128));
  EXPECT_EQ(p.queryHeads, 32);
  EXPECT_EQ(p.kvHeads, 8);
  EXPECT_EQ(p.queryRowElements, 32 * 128); // a token's row: every head
  EXPECT_EQ(p.kvRowElements, 8 * 128);
  EXPECT_EQ(p.firstKvHead, 0);
  EXPECT_FLOAT_EQ(p.scale, 1 / std::sqrt(128.0));
  expectValid(p);
}

TEST(FusedAttention, ABlockOfWholeGroupsReadsItsKvHeads) {
  // Query heads 8-15 of 32 over 8 KV heads (groups of 4): KV heads 2-3.
  SdpaProblem p = fusedOrFail(shape(2, 512, {8, 8, 32}, 8, 128));
  EXPECT_EQ(p.queryHeads, 8);
  EXPECT_EQ(p.kvHeads, 2);
  EXPECT_EQ(p.firstKvHead, 2);
  EXPECT_EQ(p.queryRowElements, 8 * 128);
  EXPECT_EQ(p.kvRowElements, 8 * 128); // the tensor still holds all 8
  expectValid(p);
}

TEST(FusedAttention, ABlockInsideOneGroupReadsOneKvHead) {
  // Query heads 6-7 of 32, both served by KV head 1.
  SdpaProblem p = fusedOrFail(shape(1, 256, {2, 6, 32}, 8, 64));
  EXPECT_EQ(p.kvHeads, 1);
  EXPECT_EQ(p.firstKvHead, 1);
  expectValid(p);
}

TEST(FusedAttention, ABlockOverReplicatedKvHeadsReadsItsOwn) {
  // Query heads 2-3 of 6 over all 6 KV heads (KV replicated on 3 ranks).
  SdpaProblem p = fusedOrFail(shape(2, 130, {2, 2, 6}, 6, 64));
  EXPECT_EQ(p.kvHeads, 2);
  EXPECT_EQ(p.firstKvHead, 2);
  EXPECT_EQ(p.kvRowElements, 6 * 64);
  expectValid(p);
}

TEST(FusedAttention, WindowsAndHeadDims) {
  for (int64_t headDim : {64, 96, 128, 256})
    expectValid(fusedOrFail(shape(2, 300, HeadBlock::whole(8), 2, headDim)));
  // Mistral's window; Gemma 2's without its soft cap; two tokens.
  expectValid(fusedOrFail(shape(1, 8192, HeadBlock::whole(32), 8, 128, 4096)));
  expectValid(fusedOrFail(shape(1, 4096, HeadBlock::whole(16), 8, 256, 4096)));
  expectValid(fusedOrFail(shape(3, 2, HeadBlock::whole(4), 2, 256)));
}

TEST(FusedAttention, SoftCapsAndDocumentsMaskInAScoreModifier) {
  // Gemma 2's layer: a cap of 50, sliding or not; packed documents with
  // and without a window; both at once.
  SdpaProblem gemma =
      fusedOrFail(shape(1, 4096, HeadBlock::whole(16), 8, 256, 4096, 50.0));
  EXPECT_EQ(gemma.softcap, 50.0);
  EXPECT_FALSE(gemma.segments);
  expectValid(gemma);
  expectValid(
      fusedOrFail(shape(1, 4096, HeadBlock::whole(16), 8, 256, 0, 50.0)));
  SdpaProblem packed = fusedOrFail(
      shape(2, 512, HeadBlock::whole(32), 8, 128, 0, 0, /*segments=*/true));
  EXPECT_TRUE(packed.segments);
  expectValid(packed);
  expectValid(fusedOrFail(shape(2, 512, {8, 8, 32}, 8, 128, 100, 0, true)));
  expectValid(
      fusedOrFail(shape(1, 300, HeadBlock::whole(8), 2, 64, 5, 2.0, true)));
}

// Rows of int32 segments or fp32 statistics 600 bytes apart (seq 150) start
// on 8 bytes, not the 16 cuDNN assumes untold; bf16 heads of a multiple of
// 8 values start on 16. A dim of one element has no stride to speak of.
TEST(FusedAttention, TensorsDeclareTheAlignmentTheyHave) {
  EXPECT_EQ(tensorAlignment({2, 1, 150, 1}, {150, 1, 1, 1}, 4), 8);
  EXPECT_EQ(tensorAlignment({2, 1, 1, 150}, {150, 150, 150, 1}, 4), 8);
  EXPECT_EQ(tensorAlignment({1, 1, 150, 1}, {150, 1, 1, 1}, 4), 16);
  EXPECT_EQ(tensorAlignment({2, 1, 1, 152}, {152, 152, 152, 1}, 4), 16);
  EXPECT_EQ(tensorAlignment({2, 4, 151, 1}, {604, 151, 1, 1}, 4), 4);
  EXPECT_EQ(tensorAlignment({2, 4, 150, 64}, {38400, 64, 256, 1}, 2), 16);
  // The conformance's packed shape of batch 2, seq 150 still validates.
  expectValid(
      fusedOrFail(shape(2, 150, HeadBlock::whole(4), 2, 64, 37, 2.0, true)));
}

TEST(FusedAttention, ShapesItDoesNotTakeRunChunked) {
  EXPECT_NE(whyNot(shape(1, 64, HeadBlock::whole(4), 2, 64), /*bf16=*/false)
                .find("fp32"),
            std::string::npos);
  for (int64_t headDim : {12, 100, 264})
    EXPECT_NE(whyNot(shape(1, 64, HeadBlock::whole(4), 2, headDim))
                  .find("head_dim " + std::to_string(headDim)),
              std::string::npos);
  // cuDNN's validation refuses one token (validateSdpaGraphs said so).
  EXPECT_NE(whyNot(shape(3, 1, HeadBlock::whole(4), 2, 64)).find("one token"),
            std::string::npos);
  // Query heads 3-4 of 32 straddle KV heads 0 and 1 (groups of 4).
  EXPECT_NE(whyNot(shape(1, 64, {2, 3, 32}, 8, 64)).find("unevenly"),
            std::string::npos);
}

TEST(FusedAttention, CudnnRefusesAGraphThatIsNoAttention) {
  // Six query heads cannot share four KV heads: cuDNN's validation says so,
  // so the graphs it passes above were checked, not waved through.
  SdpaProblem p = fusedOrFail(shape(1, 64, HeadBlock::whole(8), 4, 64));
  p.queryHeads = 6;
  p.queryRowElements = 6 * 64;
  llvm::Error error = validateSdpaGraphs(p, kHopper);
  EXPECT_TRUE(bool(error))
      << "a graph of 6 query heads over 4 KV heads was validated";
  llvm::consumeError(std::move(error));
}

} // namespace
