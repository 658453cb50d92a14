//===- FlopsTest.cpp - one FLOP model for the plan and the profile --------===//
//
// twillc's cost estimate (over the IR's ops) and twill-train's profiler
// (over the Executable's instructions) count every op of the Llama-3.1-8B
// LoRA step alike: each op against the instruction it is emitted as.
//
//===----------------------------------------------------------------------===//

#include "opmodel/Flops.h"
#include "frontend/DecoderBuilder.h"
#include "frontend/config/JobConfig.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/ResourceReport.h"
#include "runtime/executable/Opcodes.h"
#include "runtime/profile/Profiler.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <map>

using namespace twill;

namespace {

TEST(Flops, ThePlanAndTheProfileCountEveryOpOfThe8BStepAlike) {
  llvm::SmallString<256> path(TWILL_SOURCE_DIR);
  llvm::sys::path::append(path, "configs", "llama3_1_8b_lora.textproto");
  // One rank of tp=8 (the config's mesh), with the loss tiled and the
  // attention and MLP too, so that every kind that does FLOPs is there.
  llvm::Expected<JobConfig> job =
      loadJobConfig(path, {"checkpoint.random_base=true",
                           "checkpoint.base_dir=", "train.seq_len=4096",
                           "parallel.mlp_tile_tokens=2048"});
  ASSERT_TRUE(bool(job)) << llvm::toString(job.takeError());
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = buildDecoderModule(context, *job);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&context);
  mlir::twill::buildCompilePipeline(pm, *job);
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  mlir::FailureOr<Executable> executable = mlir::twill::emitExecutable(*module);
  ASSERT_TRUE(mlir::succeeded(executable));

  std::map<std::string, double> byKind; // the profile's, per op kind
  int entry = 0, compared = 0;
  for (auto function : module->getOps<mlir::func::FuncOp>()) {
    const EntryPoint &emitted = executable->entry_points(entry++);
    int index = 0;
    for (mlir::Operation &op : function.getBody().front().without_terminator()) {
      const Instruction &instruction = emitted.instructions(index++);
      double profiled = flopsOf(*executable, instruction);
      EXPECT_EQ(mlir::twill::flopsOf(&op), profiled)
          << emitted.name() << " instruction " << index - 1 << " ("
          << opcodeName(instruction.opcode()) << ")";
      byKind[opcodeName(instruction.opcode())] += profiled;
      ++compared;
    }
    EXPECT_EQ(index, emitted.instructions_size());
  }
  EXPECT_GT(compared, 1000);
  // Not vacuous: every kind that does FLOPs is counted.
  for (const char *kind : {"matmul", "attention", "attention_grad",
                           "linear_cross_entropy", "linear_cross_entropy_grad"})
    EXPECT_GT(byKind[kind], 1e9) << kind;
}

// A sliding window counts the (query, key) pairs it sees: seq w - w^2 / 2
// of the causal seq^2 / 2.
TEST(Flops, AWindowCountsThePairsItSees) {
  Instruction attention;
  attention.set_opcode(ATTENTION);
  attention.mutable_attention()->set_scale(1);
  llvm::SmallVector<int64_t> query = {2, 1024, 8, 64};
  llvm::ArrayRef<int64_t> shapes[] = {query, query, query};
  double causal = flopsOf(attention, shapes, query);
  EXPECT_EQ(causal, 2.0 * 2 * 8 * 1024 * 1024 * 64);
  attention.mutable_attention()->set_window(256);
  EXPECT_EQ(flopsOf(attention, shapes, query),
            4.0 * 2 * 8 * (1024.0 * 256 - 256.0 * 256 / 2) * 64);
  attention.mutable_attention()->set_window(4096); // longer than the sequence
  EXPECT_EQ(flopsOf(attention, shapes, query), causal);
  attention.set_opcode(ATTENTION_GRAD);
  EXPECT_EQ(flopsOf(attention, shapes, query), 2.5 * causal);
}

} // namespace
