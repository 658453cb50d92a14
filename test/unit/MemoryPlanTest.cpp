//===- MemoryPlanTest.cpp - values that share memory ----------------------===//

#include "runtime/executable/MemoryPlan.h"

#include "gtest/gtest.h"

using namespace twill;

namespace {

/// A chain x -> v1 -> v2 -> ... -> v6 -> out of 1 KiB values, where v1 is
/// read again by the last instruction.
Executable chain() {
  Executable executable;
  for (int i = 0; i < 8; ++i) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    buffer.add_shape(256);
    buffer.set_size_bytes(1024);
  }
  executable.add_inputs()->set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  for (int result = 1; result < 7; ++result) {
    Instruction &instruction = *entry.add_instructions();
    instruction.set_opcode(SCALE);
    instruction.mutable_scale()->set_factor(2);
    instruction.add_operands(result - 1);
    instruction.add_results(result);
  }
  Instruction &last = *entry.add_instructions();
  last.set_opcode(ADD);
  last.add_operands(6);
  last.add_operands(1);
  last.add_results(7);
  entry.add_outputs(7);
  return executable;
}

TEST(MemoryPlan, LiveValuesNeverShareAndDeadOnesDo) {
  Executable executable = chain();
  MemoryPlan plan = planMemory(executable, {});
  EXPECT_EQ(plan.offsets[0], -1); // the input
  EXPECT_EQ(plan.offsets[7], -1); // the output
  // v1 lives to the end: nothing else may take its place. Each other value
  // lives from its writer to its one reader.
  std::vector<std::pair<int, int>> lifetimes = {
      {0, 6}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}};
  for (int a = 1; a < 7; ++a)
    for (int b = a + 1; b < 7; ++b) {
      auto [firstA, lastA] = lifetimes[a - 1];
      auto [firstB, lastB] = lifetimes[b - 1];
      if (firstA <= lastB && firstB <= lastA) {
        EXPECT_NE(plan.offsets[a], plan.offsets[b]) << a << " and " << b;
      }
    }
  EXPECT_EQ(plan.unsharedBytes, 6 * 1024);
  EXPECT_EQ(plan.arenaBytes, 3 * 1024); // v1 and two values in flight
}

TEST(MemoryPlan, PinnedValuesKeepTheirMemory) {
  MemoryPlan plan = planMemory(chain(), {3});
  EXPECT_EQ(plan.offsets[3], -1);
  EXPECT_GE(plan.offsets[4], 0);
}

} // namespace
