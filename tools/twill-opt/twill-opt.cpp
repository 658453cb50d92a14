//===- twill-opt.cpp - inspect and transform twill IR ---------------------===//
//
// mlir-opt for Twill: every Twill dialect and pass, plus the upstream
// dialects and generic passes (canonicalize, cse, ...) its IR uses.
//
//===----------------------------------------------------------------------===//

#include "dialects/twill/TwillDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/WithColor.h"

#include <string>
#include <unistd.h>

namespace mlir::twill {
void registerTestPasses(); // test/lib
} // namespace mlir::twill

/// mlir-opt's driver writes its output (stdout or -o) through a stream
/// that reports a failed write (a full disk) as LLVM's fatal error when it
/// closes: said as twill-opt's error, naming the output, with status 1.
static void outputFailed(void *output, const char *reason, bool) {
  llvm::WithColor::error(llvm::errs(), "twill-opt")
      << "cannot write " << *static_cast<std::string *>(output) << ": "
      << llvm::StringRef(reason).rsplit(": ").second << "\n";
  llvm::errs().flush();
  _exit(1);
}

int main(int argc, char **argv) {
  // The output the driver will write, for outputFailed's message.
  static std::string output = "standard output";
  for (int i = 1; i + 1 < argc; ++i)
    if (llvm::StringRef(argv[i]) == "-o" && llvm::StringRef(argv[i + 1]) != "-")
      output = argv[i + 1];
  // The input file: a FIFO would block the driver's read forever.
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-o") {
      ++i;
      continue;
    }
    llvm::sys::fs::file_status status;
    if (!arg.starts_with("-") && !llvm::sys::fs::status(arg, status) &&
        status.type() != llvm::sys::fs::file_type::regular_file) {
      llvm::WithColor::error(llvm::errs(), "twill-opt")
          << "cannot read " << arg
          << ": it is not a regular file (a directory, a device or a FIFO)\n";
      return 1;
    }
  }
  llvm::install_fatal_error_handler(outputFailed, &output);
  mlir::registerTransformsPasses();
  mlir::twill::registerTwillPasses();
  mlir::twill::registerTestPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::twill::TwillDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Twill optimizer driver\n", registry));
}
