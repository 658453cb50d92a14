//===- twill-tblgen.cpp - generates what follows from the ops' ODS --------===//
//
// A TableGen backend (as mlir-tblgen, and IREE's for its VM op table):
// each op's ODS entry is its one definition, and the Executable's opcodes
// and the backends' tables are generated from it (OpRecords.h). Built in
// every configuration, the runtime-only bundle's included: it links only
// LLVM's TableGen and Support, never MLIR.
//
//===----------------------------------------------------------------------===//

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/TableGen/Main.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv);
  // No main function: the -gen-* option chosen names the emitter.
  return llvm::TableGenMain(argv[0], llvm::TableGenMainFn());
}
