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
#include "support/ReadFile.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/WithColor.h"

#include <string>
#include <unistd.h>

namespace mlir::twill {
void registerTestPasses(); // test/lib
} // namespace mlir::twill

/// mlir-opt's driver writes its output (stdout or -o) through a stream
/// that reports a failed write (a full disk) as LLVM's fatal error when it
/// closes: said as twill-opt's error, naming the output, with status 1.
/// Any other fatal error is said as it is.
static void fatalError(void *output, const char *reason, bool) {
  llvm::StringRef why = reason;
  llvm::raw_ostream &error = llvm::WithColor::error(llvm::errs(), "twill-opt");
  if (why.consume_front("IO failure on output stream: "))
    error << "cannot write " << *static_cast<std::string *>(output) << ": ";
  error << why << "\n";
  llvm::errs().flush();
  _exit(1);
}

int main(int argc, char **argv) {
  // The output the driver will write, for fatalError's message; the input,
  // which must not be a FIFO (the driver's read would block forever).
  static std::string output = "standard output";
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "-o" && i + 1 < argc) {
      if (llvm::StringRef(argv[++i]) != "-")
        output = argv[i];
    } else if (!arg.starts_with("-") && twill::existsButIsNotRegular(arg)) {
      llvm::WithColor::error(llvm::errs(), "twill-opt")
          << "cannot read " << arg << ": " << twill::kNotRegularFile << "\n";
      return 1;
    }
  }
  llvm::install_fatal_error_handler(fatalError, &output);
  mlir::registerTransformsPasses();
  mlir::twill::registerTwillPasses();
  mlir::twill::registerTestPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::twill::TwillDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Twill optimizer driver\n", registry));
}
