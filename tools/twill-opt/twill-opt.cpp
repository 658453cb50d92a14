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

namespace mlir::twill {
void registerTestPasses(); // test/lib
} // namespace mlir::twill

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::twill::registerTwillPasses();
  mlir::twill::registerTestPasses();
  mlir::DialectRegistry registry;
  registry.insert<mlir::twill::TwillDialect, mlir::func::FuncDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Twill optimizer driver\n", registry));
}
