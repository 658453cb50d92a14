//===- ExecutableTest.cpp - checking compiled jobs before running them ----===//

#include "runtime/executable/Executable.h"
#include "runtime/executable/Opcodes.h"

#include "llvm/Support/FormatVariadic.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <set>

using namespace twill;
using ::testing::HasSubstr;

namespace {

/// x (input) -> scale -> y, returned.
Executable validProgram() {
  Executable executable;
  executable.set_format_version(EXECUTABLE_FORMAT);
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
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
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

  // An output updates a parameter's or a state's buffer, or none: never an
  // input's.
  executable = validProgram();
  executable.mutable_entry_points(0)->set_output_updates(0, 0);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("updates buffer 0, which is no parameter or state"));
  executable = validProgram();
  executable.mutable_entry_points(0)->clear_output_roles();
  EXPECT_THAT(problemOf(executable),
              HasSubstr("does not say of each output its role"));

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

  // As many operands and results as its op's ODS says.
  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->add_operands(0);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 0 (scale) has 2 operands; its "
                        "kind takes 1"));
  executable = validProgram();
  executable.mutable_entry_points(0)->mutable_instructions(0)->clear_results();
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward: instruction 0 (scale) has 0 results; its "
                        "kind takes 1"));

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

/// validProgram with buffer 1 a state that is `kind`, kept for `of`
/// (none: empty), and the scale writing a third buffer.
Executable withState(State::Kind kind, const std::string &of) {
  Executable executable = validProgram();
  *executable.add_buffers() = executable.buffers(1);
  executable.mutable_entry_points(0)->mutable_instructions(0)->set_results(0,
                                                                           2);
  executable.mutable_entry_points(0)->set_outputs(0, 2);
  State &state = *executable.add_states();
  state.set_name("w.grad_sum");
  state.set_buffer(1);
  state.set_kind(kind);
  if (!of.empty())
    state.set_of(of);
  Parameter &parameter = *executable.add_parameters();
  parameter.set_name("w");
  parameter.set_buffer(0);
  parameter.mutable_init()->set_kind(Initializer::ZEROS);
  executable.clear_inputs();
  return executable;
}

TEST(Executable, EveryStateSaysWhatItIsAndForWhichParameter) {
  EXPECT_FALSE(verifyExecutable(withState(State::GRAD_SUM, "w")));
  EXPECT_FALSE(verifyExecutable(withState(State::STEP, "")));
  const char *says = "state 'w.grad_sum' says not what it is (or names no "
                     "parameter it is kept for)";
  EXPECT_THAT(problemOf(withState(State::KIND_UNSPECIFIED, "")),
              HasSubstr(says));
  // A gradient sum or a moment is a parameter's, of one the program has.
  EXPECT_THAT(problemOf(withState(State::EXP_AVG, "")), HasSubstr(says));
  EXPECT_THAT(problemOf(withState(State::GRAD_SUM, "v")), HasSubstr(says));
  // The step counter is no parameter's.
  EXPECT_THAT(problemOf(withState(State::STEP, "w")), HasSubstr(says));
}

TEST(Executable, AStateIsWrittenInPlaceOnlyAsItsNewValue) {
  // The scale writes the gradient sum (buffer 1) over itself: allowed
  // where the output says it is the sum's new value, as itself.
  Executable executable = withState(State::GRAD_SUM, "w");
  EntryPoint &entry = *executable.mutable_entry_points(0);
  entry.mutable_instructions(0)->set_operands(0, 1);
  entry.mutable_instructions(0)->set_results(0, 1);
  entry.set_outputs(0, 1);
  entry.set_output_updates(0, 1);
  EXPECT_FALSE(verifyExecutable(executable));
  // Not as no new value: the state would change behind the runtime's back.
  entry.set_output_updates(0, -1);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("forward writes buffer 1 of a parameter or state in "
                        "place, and returns it as no new value of it"));
  // Nor twice.
  entry.set_output_updates(0, 1);
  *entry.add_instructions() = entry.instructions(0);
  EXPECT_THAT(problemOf(executable),
              HasSubstr("instruction 1 (scale) writes a buffer twice"));
}

/// validProgram with two parameters that are rows 0-1 and 2-3 of the
/// checkpoint's tensor "t" (of `rows` rows), the second from `secondRow`.
Executable withStoredRows(int64_t secondRow, int64_t rows = 4) {
  Executable executable = validProgram();
  for (int64_t first : {int64_t(0), secondRow}) {
    Parameter &parameter = *executable.add_parameters();
    parameter.set_name(llvm::formatv("t[{0}:{1}]", first, first + 2).str());
    parameter.set_buffer(executable.buffers_size());
    *executable.add_buffers() = executable.buffers(0);
    parameter.mutable_init()->set_kind(Initializer::ZEROS);
    parameter.mutable_stored()->set_tensor("t");
    parameter.mutable_stored()->set_first_row(first);
    parameter.mutable_stored()->set_tensor_rows(rows);
  }
  return executable;
}

TEST(Executable, BlocksOfATensorCoverItsRowsOnce) {
  EXPECT_FALSE(verifyExecutable(withStoredRows(2)));
  EXPECT_THAT(problemOf(withStoredRows(3, 5)),
              HasSubstr("parameter 't[3:5]' is not the block of tensor 't' "
                        "from row 2 on"));
  EXPECT_THAT(problemOf(withStoredRows(1)),
              HasSubstr("'t[1:3]' is not the block of tensor 't' from row 2"));
  EXPECT_THAT(problemOf(withStoredRows(2, 6)),
              HasSubstr("the parameters stored in tensor 't' cover 4 of its 6 "
                        "rows"));
  // One adapter part of one weight, or base weights alike.
  Executable mixed = withStoredRows(2);
  AdapterRole &role = *mixed.mutable_parameters(1)->mutable_adapter();
  role.set_part(AdapterRole::LORA_B);
  role.set_of("w");
  EXPECT_THAT(problemOf(mixed), HasSubstr("of the others' dims and role"));
  // A parameter that is the whole tensor holds it alone.
  Executable whole = withStoredRows(2);
  Parameter &named = *whole.add_parameters();
  named = whole.parameters(0);
  named.set_name("t");
  named.clear_stored();
  named.set_buffer(whole.buffers_size());
  *whole.add_buffers() = whole.buffers(0);
  EXPECT_THAT(problemOf(whole),
              HasSubstr("parameter 't' is a whole tensor, and other "
                        "parameters are stored in it"));
}

/// x (input) -> all_reduce_start -> (scale of x) -> wait -> scale of the
/// sum, returned; `order` lists the instructions by name.
Executable inFlight(std::initializer_list<llvm::StringRef> order) {
  Executable executable = validProgram();
  for (int i = 0; i < 2; ++i)
    *executable.add_buffers() = executable.buffers(1);
  EntryPoint &entry = *executable.mutable_entry_points(0);
  entry.clear_instructions();
  entry.clear_outputs();
  entry.clear_output_roles();
  entry.clear_output_updates();
  for (llvm::StringRef name : order) {
    Instruction &instruction = *entry.add_instructions();
    if (name == "start") {
      instruction.set_opcode(ALL_REDUCE_START);
      instruction.mutable_all_reduce()->set_axis("dp");
      instruction.add_operands(0);
      instruction.add_results(2);
    } else if (name == "wait") {
      instruction.set_opcode(WAIT);
      instruction.add_operands(2);
    } else {
      // "compute" scales x into buffer 1; "use" the sum into buffer 3.
      instruction.set_opcode(SCALE);
      instruction.mutable_scale()->set_factor(2);
      instruction.add_operands(name == "use" ? 2 : 0);
      instruction.add_results(name == "use" ? 3 : 1);
    }
  }
  entry.add_outputs(3);
  entry.add_output_roles(VALUE_UNSPECIFIED);
  entry.add_output_updates(-1);
  return executable;
}

TEST(Executable, EveryCollectiveInFlightIsWaitedOnceBeforeItsResultIsRead) {
  EXPECT_FALSE(verifyExecutable(inFlight({"start", "compute", "wait", "use"})));
  EXPECT_THAT(problemOf(inFlight({"start", "compute", "use", "wait"})),
              HasSubstr("forward: instruction 2 (scale) reads buffer 2 while "
                        "the collective or copy writing it is in flight"));
  EXPECT_THAT(problemOf(inFlight({"start", "wait", "wait", "use"})),
              HasSubstr("instruction 2 (wait) waits for nothing in flight"));
  EXPECT_THAT(problemOf(inFlight({"wait", "start", "use"})),
              HasSubstr("instruction 0 (wait) reads a buffer not yet"));
  Executable unwaited = inFlight({"start", "compute"});
  unwaited.mutable_entry_points(0)->set_outputs(0, 1);
  EXPECT_THAT(problemOf(unwaited),
              HasSubstr("forward: instruction 0 (all_reduce_start) is never "
                        "waited"));
  Executable twoOperands = inFlight({"start", "wait", "use"});
  twoOperands.mutable_entry_points(0)->mutable_instructions(1)->add_operands(0);
  // Refused by the wait's arity (its op's ODS), before the pairing looks.
  EXPECT_THAT(problemOf(twoOperands),
              HasSubstr("instruction 1 (wait) has 2 operands; its kind "
                        "takes 1"));
}

// A program of another format is refused before anything else is read
// from it, naming both versions.
TEST(Executable, AnotherFormatIsRefusedNamingBoth) {
  Executable newer = validProgram();
  newer.set_format_version(EXECUTABLE_FORMAT + 1);
  EXPECT_THAT(problemOf(newer),
              HasSubstr(llvm::formatv("Executable format {0}, and this "
                                      "runtime reads format {1}",
                                      EXECUTABLE_FORMAT + 1,
                                      int(EXECUTABLE_FORMAT))
                            .str()));
  Executable old = validProgram();
  old.clear_format_version();
  EXPECT_THAT(problemOf(old),
              HasSubstr("format 0 (written before formats had versions)"));

  std::string path = ::testing::TempDir() + "/newer.twx";
  newer.mutable_job();
  std::string bytes;
  ASSERT_TRUE(newer.SerializeToString(&bytes));
  FILE *file = fopen(path.c_str(), "wb");
  ASSERT_TRUE(file);
  fwrite(bytes.data(), 1, bytes.size(), file);
  fclose(file);
  llvm::Expected<Executable> loaded = loadExecutable(path);
  ASSERT_FALSE(bool(loaded));
  EXPECT_THAT(llvm::toString(loaded.takeError()),
              HasSubstr(path + ": Executable format"));
}

// Each field of the attributes oneof is some opcode's (that each op's
// executableAttributes names a field is a fact of the build).
TEST(Executable, EveryAttributesFieldIsSomeOpcodes) {
  std::set<int> used;
  for (Opcode opcode : allOpcodes())
    used.insert(attributesOf(opcode));
  const google::protobuf::OneofDescriptor &oneof =
      *Instruction::descriptor()->FindOneofByName("attributes");
  for (int i = 0; i < oneof.field_count(); ++i)
    EXPECT_TRUE(used.count(oneof.field(i)->number()))
        << oneof.field(i)->name() << " is no opcode's";
  EXPECT_EQ(attributesOf(LINEAR_CROSS_ENTROPY_GRAD),
            Instruction::kCrossEntropy);
  EXPECT_EQ(attributesOf(REDUCE_SCATTER_START), Instruction::kGather);
  EXPECT_EQ(attributesOf(ADD), Instruction::ATTRIBUTES_NOT_SET);
}

// The counts its op's ODS gives: optional operands, variadic ones, and a
// wait's result, which is its start's buffer.
TEST(Executable, ArityIsTheOpsOwn) {
  Arity matmul = arityOf(MATMUL);
  EXPECT_EQ(matmul.leastOperands, 2);
  EXPECT_EQ(matmul.mostOperands, 3); // and the addend
  EXPECT_EQ(matmul.mostResults, 1);
  EXPECT_EQ(arityOf(CONCAT).mostOperands, -1);
  EXPECT_EQ(arityOf(SPLIT).mostResults, -1);
  Arity wait = arityOf(WAIT);
  EXPECT_EQ(wait.leastOperands, 1);
  EXPECT_EQ(wait.mostResults, 0);
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

TEST(Executable, AJobConfigGivenForAProgramIsSaidToBeOne) {
  std::string path = ::testing::TempDir() + "/job.textproto";
  FILE *file = fopen(path.c_str(), "wb");
  ASSERT_TRUE(file);
  fputs("# a job\nmodel {\n  hidden_size: 64\n}\n", file);
  fclose(file);
  llvm::Expected<Executable> loaded = loadExecutable(path);
  ASSERT_FALSE(bool(loaded));
  std::string error = llvm::toString(loaded.takeError());
  EXPECT_THAT(error, HasSubstr(path + " is text, not a program"));
  EXPECT_THAT(error, HasSubstr("`twill train " + path + "`"));
  EXPECT_THAT(error, HasSubstr("`twillc " + path + " -o job.twx`"));
}

} // namespace
