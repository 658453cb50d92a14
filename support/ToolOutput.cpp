//===- ToolOutput.cpp - a tool's standard output, checked -----------------===//

#include "support/ToolOutput.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <unistd.h>

static const char *toolName = "twill";

/// Runs before llvm::outs() is destroyed: registered after it was made.
static void checkStandardOutput() {
  llvm::outs().flush();
  if (!llvm::outs().has_error())
    return;
  std::error_code error = llvm::outs().error();
  llvm::outs().clear_error();
  llvm::WithColor::error(llvm::errs(), toolName)
      << "cannot write standard output: " << error.message() << "\n";
  _exit(1);
}

void twill::checkStandardOutputAtExit(const char *tool) {
  toolName = tool;
  llvm::outs(); // made now, so destroyed after the check runs
  std::atexit(checkStandardOutput);
}
