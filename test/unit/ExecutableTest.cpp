//===- ExecutableTest.cpp - checking compiled jobs before running them ----===//

#include "runtime/executable/Executable.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

using namespace twill;
using ::testing::HasSubstr;

namespace {

/// x (input) -> scale -> y, returned.
Executable validProgram() {
  Executable executable;
  for (int i = 0; i < 2; ++i) {
    Buffer &buffer = *executable.add_buffers();
    buffer.set_dtype(F32);
    buffer.add_shape(2);
    buffer.add_shape(3);
    buffer.set_size_bytes(24);
  }
  Input &input = *executable.add_inputs();
  input.set_name("x");
  input.set_buffer(0);
  EntryPoint &entry = *executable.add_entry_points();
  entry.set_name("forward");
  Instruction &scale = *entry.add_instructions();
  scale.set_opcode(SCALE);
  scale.add_operands(0);
  scale.add_results(1);
  scale.mutable_scale()->set_factor(2);
  entry.add_outputs(1);
  return executable;
}

std::string problemOf(const Executable &executable) {
  llvm::Error error = verifyExecutable(executable);
  EXPECT_TRUE(bool(error));
  return llvm::toString(std::move(error));
}

TEST(Executable, AcceptsAWellFormedProgram) {
  EXPECT_FALSE(verifyExecutable(validProgram()));
}

TEST(Executable, RejectsInconsistentPrograms) {
  Executable executable = validProgram();
  executable.mutable_buffers(1)->set_size_bytes(20);
  EXPECT_THAT(problemOf(executable), HasSubstr("buffer 1 has size 20"));

  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->set_operands(0,
                                                                            1);
  EXPECT_THAT(problemOf(executable), HasSubstr("reads a buffer not yet"));

  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->set_results(0,
                                                                           0);
  EXPECT_THAT(problemOf(executable), HasSubstr("writes a buffer twice"));

  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->set_operands(0,
                                                                            7);
  EXPECT_THAT(problemOf(executable), HasSubstr("reads a buffer not yet"));

  // An opcode from a newer compiler (99): protobuf keeps it aside, unknown.
  executable = validProgram();
  Instruction future;
  ASSERT_TRUE(future.ParseFromString(std::string("\x08\x63", 2)));
  future.add_operands(0);
  future.add_results(1);
  *executable.mutable_entry_points(0)->mutable_instructions(0) = future;
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 0 (opcode_unspecified) has no "
                        "opcode this runtime knows"));

  executable = validProgram();
  executable.mutable_entry_points(0)
      ->mutable_instructions(0)
      ->mutable_scale()
      ->clear_factor();
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 0 (scale) lacks attribute "
                        "factor"));

  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->mutable_matmul();
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 0 (scale) lacks its attributes"));

  executable = validProgram();
  executable.mutable_inputs(0)->set_buffer(-1);
  EXPECT_THAT(problemOf(executable), HasSubstr("input 'x' has a bad buffer"));
}

TEST(Executable, GarbageFileIsNamed) {
  std::string path = ::testing::TempDir() + "/garbage.twx";
  FILE *file = fopen(path.c_str(), "wb");
  ASSERT_TRUE(file);
  fputs("\xff\xff\xff not a protobuf", file);
  fclose(file);
  llvm::Expected<Executable> loaded = loadExecutable(path);
  ASSERT_FALSE(bool(loaded));
  EXPECT_THAT(llvm::toString(loaded.takeError()),
              HasSubstr(path + " is not an Executable"));
}

} // namespace
