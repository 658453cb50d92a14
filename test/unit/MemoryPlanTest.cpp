//===- MemoryPlanTest.cpp - the runtime's check of a compiled plan --------===//
//
// twill-plan-memory writes the plan (its lit test, plan-memory.mlir, shows
// how it lays values out); the runtime refuses a plan that would let two
// live values share bytes (but a matmul computing in place over its
// addend), spill out of the arena, or put a value that must outlive a run
// in it.
//
//===----------------------------------------------------------------------===//

#include "runtime/executable/Executable.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::HasSubstr;

namespace {

/// A chain x -> v1 -> v2 -> ... -> v6 -> out of 1 KiB values, where v1 is
/// read again by the last instruction, planned as twill-plan-memory plans
/// it: v1 at 0 for the whole run, the others taking turns at 1024 and 2048.
Executable chain() {
  Executable executable;
  executable.set_format_version(EXECUTABLE_FORMAT);
  const int64_t offsets[8] = {-1, 0, 1024, 2048, 1024, 2048, 1024, -1};
  for (int64_t offset : offsets) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    buffer.add_shape(256);
    buffer.set_size_bytes(1024);
    if (offset >= 0)
      buffer.set_arena_offset(offset);
  }
  executable.set_arena_bytes(3 * 1024);
  executable.add_inputs()->set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  entry.set_name("forward");
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
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  return executable;
}

std::string problemOf(const Executable &executable) {
  llvm::Error error = checkMemoryPlan(executable);
  EXPECT_TRUE(bool(error));
  return llvm::toString(std::move(error));
}

TEST(MemoryPlan, ASoundPlanIsTakenAsItIs) {
  Executable executable = chain();
  EXPECT_FALSE(verifyExecutable(executable));
  MemoryPlan plan = memoryPlanOf(executable);
  EXPECT_EQ(plan.offsets[0], -1); // the input
  EXPECT_EQ(plan.offsets[3], 2048);
  EXPECT_EQ(plan.offsets[7], -1); // the output
  EXPECT_EQ(plan.arenaBytes, 3 * 1024);
  EXPECT_EQ(plan.unsharedBytes, 6 * 1024);
  EXPECT_EQ(plan.ownBytes, 2 * 1024);
  EXPECT_EQ(plan.hostReadBytes, 0);
  BufferSet buffers(executable);
  EXPECT_EQ(buffers.data(4) - buffers.data(1), 1024);

  // A value the host reads (logits) is counted apart: a training run that
  // never computes it never holds it.
  executable.mutable_buffers(7)->set_host_read(true);
  plan = memoryPlanOf(executable);
  EXPECT_EQ(plan.ownBytes, 1024);
  EXPECT_EQ(plan.hostReadBytes, 1024);
}

TEST(MemoryPlan, LiveValuesMayNotShare) {
  Executable executable = chain();
  executable.mutable_buffers(3)->set_arena_offset(1024); // over v2, its input
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 2 writes buffer 3 over buffer "
                        "2, which is still to be read"));

  executable = chain();
  executable.mutable_buffers(6)->set_arena_offset(0); // over v1, read last
  EXPECT_THAT(problemOf(executable), HasSubstr("over buffer 1"));

  // The loader says so too.
  llvm::Error error = verifyExecutable(executable);
  EXPECT_THAT(llvm::toString(std::move(error)),
              HasSubstr("invalid executable: its memory plan is unsound"));
}

/// x -> a = 2x at 0 -> m = x x + a, also at 0 (in place over its addend)
/// -> out = 2m; `extra` reads a once more at the end, `factor` makes a the
/// matmul's left factor too.
Executable inPlace(bool extra, bool factor) {
  Executable executable;
  executable.set_format_version(EXECUTABLE_FORMAT);
  for (int64_t offset : {-1, 0, 0, -1, -1}) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    buffer.add_shape(4);
    buffer.add_shape(4);
    buffer.set_size_bytes(64);
    if (offset >= 0)
      buffer.set_arena_offset(offset);
  }
  executable.set_arena_bytes(64);
  executable.add_inputs()->set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  entry.set_name("forward");
  auto add = [&](Opcode opcode, std::initializer_list<int> operands,
                 int result) -> Instruction & {
    Instruction &instruction = *entry.add_instructions();
    instruction.set_opcode(opcode);
    for (int operand : operands)
      instruction.add_operands(operand);
    instruction.add_results(result);
    return instruction;
  };
  add(SCALE, {0}, 1).mutable_scale()->set_factor(2);
  MatmulAttributes &matmul =
      *add(MATMUL, {factor ? 1 : 0, 0, 1}, 2).mutable_matmul();
  matmul.set_transpose_lhs(false);
  matmul.set_transpose_rhs(false);
  matmul.set_alpha(1);
  add(SCALE, {2}, 3).mutable_scale()->set_factor(2);
  entry.add_outputs(3);
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  if (extra) {
    add(ADD, {3, 1}, 4);
    entry.add_outputs(4);
    entry.add_output_roles(VALUE_UNSPECIFIED);
    entry.add_output_updates(-1);
  }
  return executable;
}

TEST(MemoryPlan, AMatmulMayComputeInPlaceOverItsLastReadAddend) {
  llvm::Error error = verifyExecutable(inPlace(false, false));
  EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
  EXPECT_THAT(problemOf(inPlace(true, false)),
              HasSubstr("instruction 1 writes buffer 2 over buffer 1"));
  EXPECT_THAT(problemOf(inPlace(false, true)),
              HasSubstr("instruction 1 writes buffer 2 over buffer 1"));
}

/// x -> a = 2x at 0 -> all_reduce_start a -> s at 64 -> b = 2x at
/// `bOffset` -> wait s -> out = 2s + b: the sum reads a until its wait.
Executable sumInFlight(int64_t bOffset) {
  Executable executable;
  executable.set_format_version(EXECUTABLE_FORMAT);
  for (int64_t offset : {int64_t(-1), int64_t(0), int64_t(64), bOffset,
                         int64_t(-1), int64_t(-1)}) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    buffer.add_shape(16);
    buffer.set_size_bytes(64);
    if (offset >= 0)
      buffer.set_arena_offset(offset);
  }
  executable.set_arena_bytes(192);
  executable.add_inputs()->set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  entry.set_name("forward");
  auto add = [&](Opcode opcode, std::initializer_list<int> operands,
                 std::initializer_list<int> results) -> Instruction & {
    Instruction &instruction = *entry.add_instructions();
    instruction.set_opcode(opcode);
    for (int operand : operands)
      instruction.add_operands(operand);
    for (int result : results)
      instruction.add_results(result);
    return instruction;
  };
  add(SCALE, {0}, {1}).mutable_scale()->set_factor(2);
  add(ALL_REDUCE_START, {1}, {2}).mutable_all_reduce()->set_axis("dp");
  add(SCALE, {0}, {3}).mutable_scale()->set_factor(2);
  add(WAIT, {2}, {});
  add(SCALE, {2}, {4}).mutable_scale()->set_factor(2);
  add(ADD, {4, 3}, {5});
  entry.add_outputs(5);
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  return executable;
}

TEST(MemoryPlan, ACollectiveInFlightHoldsItsInputAndResultUntilItsWait) {
  llvm::Error error = verifyExecutable(sumInFlight(128));
  EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
  // Its input is read by nothing after the start, but by MPI until the wait.
  EXPECT_THAT(problemOf(sumInFlight(0)),
              HasSubstr("instruction 2 writes buffer 3 over buffer 1"));
  EXPECT_THAT(problemOf(sumInFlight(64)),
              HasSubstr("instruction 2 writes buffer 3 over buffer 2"));
}

TEST(MemoryPlan, ValuesStayInsideTheArena) {
  Executable executable = chain();
  executable.mutable_buffers(5)->set_arena_offset(3 * 1024);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("buffer 5 (1024 bytes) at offset 3072 is not aligned "
                        "inside the 3072-byte arena"));
  executable = chain();
  executable.mutable_buffers(5)->set_arena_offset(1000);
  EXPECT_THAT(problemOf(executable), HasSubstr("at offset 1000 is not"));
}

TEST(MemoryPlan, WhatOutlivesARunKeepsItsMemory) {
  Executable executable = chain();
  executable.mutable_buffers(7)->set_arena_offset(0);
  executable.set_arena_bytes(4 * 1024);
  EXPECT_THAT(problemOf(executable), HasSubstr("buffer 7 is an output"));
  executable = chain();
  executable.mutable_buffers(0)->set_arena_offset(0);
  EXPECT_THAT(problemOf(executable), HasSubstr("buffer 0 is an input"));
  executable = chain();
  executable.mutable_buffers(4)->set_host_read(true);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("buffer 4 is read by the host after a run"));
}

} // namespace

namespace {

/// The chain with v2 offloaded: instruction 2 (v2 -> v3) becomes an
/// OFFLOAD into the host arena and instruction 3 a RELOAD back.
Executable offloadedChain() {
  Executable executable = chain();
  executable.set_host_arena_bytes(1024);
  Buffer &host = *executable.mutable_buffers(3);
  host.set_in_host_arena(true);
  host.set_arena_offset(0);
  EntryPoint &entry = *executable.mutable_entry_points(0);
  entry.mutable_instructions(2)->set_opcode(OFFLOAD);
  entry.mutable_instructions(2)->clear_scale();
  entry.mutable_instructions(3)->set_opcode(RELOAD);
  entry.mutable_instructions(3)->clear_scale();
  return executable;
}

TEST(MemoryPlan, OnlyOffloadsWriteAndReloadsReadTheHostArena) {
  Executable executable = offloadedChain();
  EXPECT_FALSE(checkMemoryPlan(executable));
  MemoryPlan plan = memoryPlanOf(executable);
  EXPECT_EQ(plan.hostArenaBytes, 1024);
  EXPECT_TRUE(plan.inHostArena[3]);
  // Host offset 0 is not device offset 0 (v1, alive throughout).
  BufferSet buffers(executable);
  EXPECT_NE(buffers.data(3), buffers.data(1));

  Executable scaled = offloadedChain();
  scaled.mutable_entry_points(0)->mutable_instructions(3)->set_opcode(SCALE);
  scaled.mutable_entry_points(0)
      ->mutable_instructions(3)
      ->mutable_scale()
      ->set_factor(2);
  EXPECT_THAT(problemOf(scaled),
              HasSubstr("buffer 3 is in the host arena, and scale reads it"));

  Executable outside = offloadedChain();
  outside.set_host_arena_bytes(512);
  EXPECT_THAT(problemOf(outside),
              HasSubstr("is not aligned inside the 512-byte host arena"));
}

/// The offloaded chain with its copies in flight: instructions 2-5 are
/// OFFLOAD_START v2 -> v3 (host), WAIT v3, RELOAD_START v3 -> v4, WAIT v4.
Executable copiesInFlight() {
  Executable executable = offloadedChain();
  auto &instructions =
      *executable.mutable_entry_points(0)->mutable_instructions();
  instructions.Mutable(2)->set_opcode(OFFLOAD_START);
  instructions.Mutable(3)->set_opcode(RELOAD_START);
  for (int at : {4, 3}) { // a wait after the reload, then after the offload
    Instruction &wait = *instructions.Add();
    wait.set_opcode(WAIT);
    wait.add_operands(instructions.Get(at - 1).results(0));
    for (int i = instructions.size() - 1; i > at; --i)
      instructions.SwapElements(i, i - 1);
  }
  return executable;
}

TEST(MemoryPlan, CopiesInFlightWriteAndReadTheHostArenaAndHoldTheirInput) {
  EXPECT_FALSE(verifyExecutable(copiesInFlight()));

  // A value placed over the offload's input (v2, at 1024) before its wait.
  Executable over = copiesInFlight();
  Buffer &placed = *over.add_buffers();
  placed = over.buffers(2);
  auto &instructions = *over.mutable_entry_points(0)->mutable_instructions();
  Instruction &scale = *instructions.Add();
  scale.set_opcode(SCALE);
  scale.mutable_scale()->set_factor(2);
  scale.add_operands(1);
  scale.add_results(over.buffers_size() - 1);
  for (int i = instructions.size() - 1; i > 3; --i)
    instructions.SwapElements(i, i - 1);
  EXPECT_THAT(problemOf(over),
              HasSubstr("instruction 3 writes buffer 8 over buffer 2"));

  // What the offload's wait yields is read by a kernel.
  Executable read = copiesInFlight();
  auto &readInstructions =
      *read.mutable_entry_points(0)->mutable_instructions();
  readInstructions.Mutable(4)->set_opcode(SCALE);
  readInstructions.Mutable(4)->mutable_scale()->set_factor(2);
  readInstructions.DeleteSubrange(5, 1); // the reload's wait
  EXPECT_THAT(problemOf(read),
              HasSubstr("buffer 3 is in the host arena, and scale reads it"));
}

} // namespace
