//===- ShapesTest.cpp - each op's shape rule, and both sides using it -----===//
//
// opmodel/Shapes.h is the one shape rule of an op: the dialect's verifiers
// (test/lit/ops-invalid.mlir) and the runtime's decoders report it in the
// same words. Here each rule on good and bad shapes, and the runtime's
// decoders on the very shapes ops-invalid.mlir gives the verifiers.
//
//===----------------------------------------------------------------------===//

#include "opmodel/Shapes.h"
#include "runtime/backend/shapes/ElementwiseShapes.h"
#include "runtime/backend/shapes/LayerShapes.h"
#include "runtime/backend/shapes/MatmulShape.h"
#include "runtime/backend/shapes/OptimizerShapes.h"

#include <gtest/gtest.h>

using namespace twill;

namespace {

/// The rule's message, or "" where it holds.
std::string problemOf(llvm::Error rule) {
  return rule ? llvm::toString(std::move(rule)) : "";
}
template <typename T> std::string problemOf(llvm::Expected<T> rule) {
  return rule ? "" : llvm::toString(rule.takeError());
}

TEST(Shapes, MatmulDimsAndItsRefusals) {
  // A batch of products sharing one weight, transposed.
  llvm::Expected<shapes::MatmulDims> dims =
      shapes::matmul({2, 8, 64}, {96, 64}, {2, 8, 96}, false, true);
  ASSERT_TRUE(bool(dims)) << llvm::toString(dims.takeError());
  EXPECT_EQ(dims->batch, 2);
  EXPECT_EQ(dims->m, 8);
  EXPECT_EQ(dims->k, 64);
  EXPECT_EQ(dims->n, 96);
  EXPECT_FALSE(dims->rhsBatched);
  // A weight's gradient: the batch sums into k.
  dims = shapes::matmul({2, 8, 5}, {2, 8, 7}, {5, 7}, true, false);
  ASSERT_TRUE(bool(dims)) << llvm::toString(dims.takeError());
  EXPECT_EQ(dims->batch, 1);
  EXPECT_EQ(dims->k, 16);
  EXPECT_FALSE(dims->rhsBatched);

  EXPECT_EQ(problemOf(shapes::matmul({2, 8, 64}, {96, 32}, {2, 8, 96}, false,
                                     true)),
            "contracting dims differ: 64 vs 32");
  EXPECT_EQ(problemOf(shapes::matmul({3, 8, 16}, {4, 16, 8}, {3, 8, 8}, false,
                                     false)),
            "rhs must have no batch dims or lhs's [3], got [4]");
  EXPECT_EQ(problemOf(shapes::matmul({8}, {8, 4}, {4}, false, false)),
            "operands must have rank 2 or more");
  EXPECT_EQ(
      problemOf(shapes::matmul({2, 5, 8}, {2, 8, 7}, {5, 7}, false, false)),
      "sums over batch dims only with transpose_lhs and without "
      "transpose_rhs");
  EXPECT_EQ(problemOf(shapes::matmul({8, 16}, {16, 4}, {4, 8}, false, false)),
            "result must have shape [8, 4], got [4, 8]");
}

TEST(Shapes, LayerRules) {
  EXPECT_EQ(problemOf(shapes::embedding({512, 64}, {2, 8}, {2, 8, 64})), "");
  EXPECT_EQ(problemOf(shapes::embedding({512}, {2, 8}, {2, 8, 64})),
            "table must have rank 2, got 1");
  EXPECT_EQ(problemOf(shapes::embeddingGrad({2, 8}, {2, 8, 32}, {512, 64})),
            "grad must have shape [2, 8, 64], got [2, 8, 32]");
  EXPECT_EQ(problemOf(shapes::rmsNorm({2, 8, 64}, {64}, {2, 8, 64})), "");
  EXPECT_EQ(problemOf(shapes::rmsNorm({2, 8, 64}, {32}, {2, 8, 64})),
            "weight must have shape [64], got [32]");
  EXPECT_EQ(problemOf(shapes::rmsNormGrad({2, 64}, {64}, {2, 63}, {2, 64})),
            "grad must have shape [2, 64], got [2, 63]");
  EXPECT_EQ(problemOf(shapes::rmsNormWeightGrad({}, {}, {})),
            "input must have rank 1 or more");
  EXPECT_EQ(problemOf(shapes::rmsNormWeightGrad({2, 64}, {2, 64}, {2, 64})),
            "result must have shape [64], got [2, 64]");
  EXPECT_EQ(problemOf(shapes::rope({2, 8, 4, 16}, {2, 8}, {2, 8, 4, 16})), "");
  EXPECT_EQ(problemOf(shapes::rope({2, 8, 4, 15}, {2, 8}, {2, 8, 4, 15})),
            "head dim must be even, got 15");
  EXPECT_EQ(problemOf(shapes::rope({2, 8, 4, 16}, {2, 6}, {2, 8, 4, 16})),
            "positions must have shape [2, 8], got [2, 6]");
  EXPECT_EQ(problemOf(shapes::rope({8, 4, 16}, {8}, {8, 4, 16})),
            "input must have rank 4, got 3");
}

TEST(Shapes, AttentionRules) {
  std::vector<int64_t> q = {2, 8, 4, 16}, kv = {2, 8, 2, 16}, lse = {2, 4, 8};
  EXPECT_EQ(
      problemOf(shapes::attention(q, kv, kv, std::nullopt, q, lse, false)), "");
  EXPECT_EQ(problemOf(shapes::attention(q, {2, 8, 2, 8}, kv, std::nullopt, q,
                                        lse, false)),
            "key must have shape [2, 8, 2, 16], got [2, 8, 2, 8]");
  EXPECT_EQ(problemOf(shapes::attention(q, kv, kv, shapes::Shape{2, 7}, q,
                                        lse, false)),
            "segments must have shape [2, 8], got [2, 7]");
  // The log-sum-exp is [batch, heads, seq], not the query's order.
  EXPECT_EQ(problemOf(shapes::attention(q, kv, kv, std::nullopt, q, {2, 8, 4},
                                        false)),
            "log_sum_exp must have shape [2, 4, 8], got [2, 8, 4]");
  // 3 query heads on 2 key/value heads: only as one rank's block of them.
  std::vector<int64_t> three = {2, 8, 3, 16};
  EXPECT_EQ(problemOf(shapes::attention(three, kv, kv, std::nullopt, three,
                                        {2, 3, 8}, false)),
            "query heads (3) must be a multiple of key/value heads (2)");
  std::vector<int64_t> one = {2, 8, 1, 16};
  EXPECT_EQ(problemOf(shapes::attention(one, kv, kv, std::nullopt, one,
                                        {2, 1, 8}, true)),
            "");
  EXPECT_EQ(problemOf(shapes::attentionGrad(q, kv, kv, q, lse, q, std::nullopt,
                                            q, kv, q, false)),
            "value_grad must have shape [2, 8, 2, 16], got [2, 8, 4, 16]");
  EXPECT_EQ(problemOf(shapes::attentionGrad(q, kv, kv, q, {2, 4}, q,
                                            std::nullopt, q, kv, kv, false)),
            "log_sum_exp must have shape [2, 4, 8], got [2, 4]");
}

TEST(Shapes, TiledLogitsRules) {
  EXPECT_EQ(problemOf(shapes::tiledLogits({2, 8, 64}, {512, 64}, {2, 8},
                                          {5, 512})),
            "");
  EXPECT_EQ(problemOf(shapes::tiledLogits({2, 8, 64}, {512, 64}, {2, 8},
                                          {0, 512})),
            "tile must hold at least one row");
  EXPECT_EQ(problemOf(shapes::tiledLogits({2, 8, 64}, {512, 32}, {2, 8},
                                          {5, 512})),
            "weight must have shape [512, 64], got [512, 32]");
  EXPECT_EQ(problemOf(shapes::tiledLogitsGrad({2, 8, 64}, {512, 64}, {2, 8},
                                              {5, 512}, {2, 8, 64}, true)),
            "result must have shape [512, 64], got [2, 8, 64]");
}

TEST(Shapes, ElementwiseLayoutAndOptimizerRules) {
  EXPECT_EQ(problemOf(shapes::binary({2, 8}, {2, 8}, {2, 8})), "");
  EXPECT_EQ(problemOf(shapes::binary({2, 8}, {8, 2}, {2, 8})),
            "rhs must have shape [2, 8], got [8, 2]");
  EXPECT_EQ(problemOf(shapes::gatedGrad({4}, {4}, {4}, {4}, {5})),
            "up_grad must have shape [4], got [5]");
  EXPECT_EQ(problemOf(shapes::reshape({2, 8}, {4, 5})),
            "cannot reshape 16 elements into 20");
  EXPECT_EQ(problemOf(shapes::transpose({2, 8, 4}, {2, 0, 1}, {4, 2, 8})), "");
  EXPECT_EQ(problemOf(shapes::transpose({2, 8, 4}, {2, 0, 1}, {8, 2, 4})),
            "result must have shape [4, 2, 8], got [8, 2, 4]");
  EXPECT_EQ(problemOf(shapes::transpose({2, 8, 4}, {0, 0, 1}, {2, 2, 8})),
            "permutation [0, 0, 1] is not a permutation of the 3 input dims");
  std::vector<int64_t> first = {2, 3, 4}, second = {2, 5, 4}, bad = {2, 3, 5};
  EXPECT_EQ(problemOf(shapes::pieces({2, 8, 4}, {first, second}, 1, 1)), "");
  EXPECT_EQ(problemOf(shapes::pieces({2, 8, 4}, {first, bad}, 1, 1)),
            "piece must have shape [2, 3, 4], got [2, 3, 5]");
  EXPECT_EQ(problemOf(shapes::pieces({2, 8, 4}, {first, first}, 1, 1))
                .rfind("pieces do not lay out dim 1: ", 0),
            0u);
  EXPECT_EQ(problemOf(shapes::pieces({2, 8}, {first}, 2, 1)),
            "dim 2 is not a dim of [2, 8]");
  EXPECT_EQ(problemOf(shapes::scaleColumnsGrad({6, 4}, {4}, {6, 4}, {6, 4},
                                               {6})),
            "scale_grad must have shape [4], got [6]");
  EXPECT_EQ(problemOf(shapes::rowSumSquares({}, {})),
            "input must have a dim to sum over");
  EXPECT_EQ(problemOf(shapes::dropout({2, 8, 64}, {2, 7}, {2, 8, 64})),
            "tokens must have shape [2, 8], got [2, 7]");
  EXPECT_EQ(problemOf(shapes::crossEntropy({2, 8, 512}, {2, 8})), "");
  EXPECT_EQ(problemOf(shapes::crossEntropyGrad({2, 8, 512}, {2, 8}, {16, 512})),
            "result must have shape [2, 8, 512], got [16, 512]");
  EXPECT_EQ(problemOf(shapes::adamw({8}, {8}, {8}, {8}, {8}, {7}, {8})),
            "new_exp_avg must have shape [8], got [7]");
}

TEST(Shapes, DequantizeRuleKeepsBlocksWhole) {
  // A [10, 192] weight in blocks of 64: 30 blocks, 2 nested ones of 16.
  EXPECT_EQ(problemOf(shapes::dequantize({10, 96}, {10, 3}, {2}, {}, {10, 192},
                                         64, 16, 10, 192)),
            "");
  // A rank's rows, or one whole block of columns.
  EXPECT_EQ(problemOf(shapes::dequantize({4, 96}, {4, 3}, {2}, {}, {4, 192}, 64,
                                         16, 10, 192)),
            "");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 32}, {10, 1}, {2}, {}, {10, 64},
                                         64, 16, 10, 192)),
            "");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 48}, {10, 2}, {2}, {}, {10, 96},
                                         64, 16, 10, 192)),
            "the result [10, 96] is no block of the [10, 192] weight in whole "
            "blocks of 64 columns");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 50}, {10, 1}, {2}, {}, {10, 100},
                                         64, 16, 10, 100)),
            "block_size 64 does not divide the weight's 100 columns");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 96}, {10, 3}, {3}, {}, {10, 192},
                                         64, 16, 10, 192)),
            "nested_absmax must have shape [2], got [3]");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 96}, {10, 3}, {2}, {1}, {10, 192},
                                         64, 16, 10, 192)),
            "nested_offset must have shape [], got [1]");
  EXPECT_EQ(problemOf(shapes::dequantize({10, 96}, {10, 3}, {2}, {}, {10, 192},
                                         63, 16, 10, 192)),
            "block_size must be even and at least 2 and nested_block_size "
            "positive, got 63 and 16");
}

TEST(Shapes, DequantizeFp8Rule) {
  EXPECT_EQ(problemOf(shapes::dequantizeFp8({4, 8}, {4}, {4, 8})), "");
  EXPECT_EQ(problemOf(shapes::dequantizeFp8({4, 8}, {8}, {4, 8})),
            "scales must have shape [4], got [8]");
  EXPECT_EQ(problemOf(shapes::dequantizeFp8({4, 7}, {4}, {4, 8})),
            "values must have shape [4, 8], got [4, 7]");
}

TEST(Shapes, CollectiveRules) {
  using shapes::Collective;
  // 10 rows over 4 ranks: blocks of 3, the last padded.
  EXPECT_EQ(problemOf(shapes::collective(Collective::AllGather, {3, 8},
                                         {10, 8}, 0, 0, 4, "tp")),
            "");
  EXPECT_EQ(problemOf(shapes::collective(Collective::AllGather, {3, 8},
                                         {13, 8}, 0, 0, 4, "tp")),
            "result must have shape [12, 8], got [13, 8]");
  EXPECT_EQ(problemOf(shapes::collective(Collective::ReduceScatter, {10, 8},
                                         {3, 8}, 0, 0, 4, "dp")),
            "");
  EXPECT_EQ(problemOf(shapes::collective(Collective::AllReduce, {10, 8},
                                         {8, 10}, 0, 0, 4, "dp")),
            "result must have shape [10, 8], got [8, 10]");
  EXPECT_EQ(problemOf(shapes::collective(Collective::AllToAll, {2, 8, 6},
                                         {2, 32, 6}, 1, 2, 4, "tp")),
            "split dim 2 of size 6 does not split over the 4 ranks of \"tp\"");
  EXPECT_EQ(problemOf(shapes::collective(Collective::AllToAll, {2, 8, 8},
                                         {2, 32, 2}, 1, 2, 4, "tp")),
            "");
  EXPECT_EQ(problemOf(shapes::collectiveDims(Collective::LocalSlice,
                                             {2, 8, 8}, 3, 0)),
            "dim 3 is not a dim of a 3-d tensor");
}

/// A buffer's shape and dtype.
struct Value {
  std::vector<int64_t> shape;
  DType dtype = F32;
};

/// One instruction of `opcode` over buffers of these values (its operands,
/// then its results), viewed as a backend's runner sees it.
class OneInstruction {
public:
  OneInstruction(Opcode opcode, std::vector<Value> operands,
                 std::vector<Value> results) {
    instruction.set_opcode(opcode);
    for (const Value &value : operands)
      instruction.add_operands(add(value));
    for (const Value &value : results)
      instruction.add_results(add(value));
  }
  Instruction *operator->() { return &instruction; }
  InstructionView view() const {
    return InstructionView(executable, instruction, nowhere, nullptr);
  }

private:
  int add(const Value &value) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(value.dtype);
    for (int64_t dim : value.shape)
      buffer.add_shape(dim);
    return executable.buffers_size() - 1;
  }
  static void *nowhere(int) { return nullptr; }

  Executable executable;
  Instruction instruction;
};

TEST(Shapes, TheRuntimeRefusesInTheVerifiersWords) {
  // test/lit/ops-invalid.mlir's @matmul_contracting and @rms_norm_weight.
  OneInstruction matmul(MATMUL, {{{2, 8, 64}}, {{96, 32}}}, {{{2, 8, 96}}});
  matmul->mutable_matmul()->set_transpose_rhs(true);
  EXPECT_EQ(problemOf(matmulShape(matmul.view())),
            "matmul: contracting dims differ: 64 vs 32");
  OneInstruction norm(RMS_NORM, {{{2, 8, 64}}, {{32}}}, {{{2, 8, 64}}});
  norm->mutable_rms_norm()->set_epsilon(1e-5);
  EXPECT_EQ(problemOf(rmsNormShape(norm.view())),
            "rms_norm: weight must have shape [64], got [32]");
  OneInstruction rope(ROPE, {{{2, 8, 4, 15}}, {{2, 8}, I32}},
                      {{{2, 8, 4, 15}}});
  rope->mutable_rope()->set_theta(10000);
  EXPECT_EQ(problemOf(ropeShape(rope.view())),
            "rope: head dim must be even, got 15");

  // A transpose whose result holds the input's count but not its permuted
  // shape: the runtime compared counts only before the rule was shared.
  OneInstruction transpose(TRANSPOSE, {{{2, 8, 4}}}, {{{8, 2, 4}}});
  for (int64_t dim : {2, 0, 1})
    transpose->mutable_transpose()->add_permutation(dim);
  EXPECT_EQ(problemOf(transposePermutation(transpose.view())),
            "transpose: result must have shape [4, 2, 8], got [8, 2, 4]");

  // And accepts what the verifier does, with the dims its kernel needs.
  OneInstruction good(MATMUL, {{{2, 8, 64}}, {{96, 64}}, {{2, 8, 96}}},
                      {{{2, 8, 96}}});
  good->mutable_matmul()->set_transpose_rhs(true);
  llvm::Expected<MatmulShape> shape = matmulShape(good.view());
  ASSERT_TRUE(bool(shape)) << llvm::toString(shape.takeError());
  EXPECT_TRUE(shape->hasAddend);
  EXPECT_EQ(shape->batch * shape->m, 16);
  EXPECT_EQ(shape->k, 64);
  EXPECT_EQ(shape->n, 96);
}

// The optimizer's norms and scalar ops: one decoder for both backends.
TEST(Shapes, TheOptimizersScalarsAreCheckedOnce) {
  OneInstruction schedule(LR_SCHEDULE, {{{}, I64}, {{}, I64}}, {{{2}}});
  EXPECT_EQ(problemOf(scalarShape(schedule.view())),
            "lr_schedule: expects scalars");
  OneInstruction increment(INCREMENT, {{{}, I64}}, {{{}, F32}});
  EXPECT_NE(problemOf(scalarShape(increment.view())), "");
  OneInstruction clip(CLIP_COEFFICIENT, {{{}}}, {{{}}});
  EXPECT_EQ(problemOf(scalarShape(clip.view())), "");
  OneInstruction norm(GLOBAL_NORM, {{{4, 4}}, {{3}, BF16}}, {{{}}});
  EXPECT_EQ(problemOf(squaresShape(norm.view())),
            "global_norm: inputs must be f32");
  OneInstruction sums(SUM_SQUARES, {{{4, 4}}, {{3}}}, {{{}}});
  EXPECT_EQ(problemOf(squaresShape(sums.view())), "");
}

} // namespace
