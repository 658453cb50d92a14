//===- EmitExecutableTest.cpp - every twill op has its opcode -------------===//
//
// The emitter finds an op's opcode by its name (opcodeOf), so a new op
// needs no case of its own unless it carries attributes; this holds the
// dialect and the Opcode enum to each other.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/TwillDialect.h"
#include "passes/Passes.h"
#include "runtime/executable/Opcodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

using namespace twill;

namespace {

TEST(EmitExecutable, EveryOpOfTheDialectHasAnOpcodeAndEachOpcodeAnOp) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::twill::TwillDialect>();
  std::set<std::string> withoutOpcode;
  std::set<Opcode> opcodes;
  for (mlir::RegisteredOperationName name :
       context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "twill")
      continue;
    if (std::optional<Opcode> opcode = mlir::twill::opcodeOf(name)) {
      EXPECT_EQ(opcodeName(*opcode), name.stripDialect().str());
      EXPECT_TRUE(opcodes.insert(*opcode).second);
    } else {
      withoutOpcode.insert(name.getStringRef().str());
    }
  }
  // The mesh is declared, not run; detach is gone after autodiff.
  EXPECT_EQ(withoutOpcode,
            (std::set<std::string>{"twill.detach", "twill.mesh"}));
  EXPECT_EQ(opcodes.size(), allOpcodes().size());
  EXPECT_EQ(mlir::twill::opcodeOf(mlir::OperationName("func.return", &context)),
            std::nullopt);
}

} // namespace
