//===- twillc.cpp - compile a Twill job -----------------------------------===//
//
//   twillc JOB.textproto [field.path=value ...] --emit=config|mlir
//
// Resolves the job (textproto, the model folder's config.json, overrides,
// defaults) and validates it; `--emit=config` prints the result, so a user
// sees exactly what will run, and `--emit=mlir` the traced model.
//
//===----------------------------------------------------------------------===//

#include "frontend/JobConfig.h"
#include "frontend/LlamaBuilder.h"

#include "google/protobuf/text_format.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
enum class Emit { Config, Mlir };
} // namespace

static cl::opt<std::string> jobPath(cl::Positional, cl::Required,
                                    cl::desc("<job.textproto>"));
static cl::list<std::string> overrides(cl::Positional,
                                       cl::desc("[field.path=value ...]"));
static cl::opt<Emit> emit(
    "emit", cl::desc("What to print"), cl::init(Emit::Config),
    cl::values(
        clEnumValN(Emit::Config, "config",
                   "the resolved, validated job config (textproto)"),
        clEnumValN(Emit::Mlir, "mlir",
                   "the model's forward pass traced into the twill dialect")));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Twill job compiler\n");

  llvm::Expected<twill::JobConfig> config =
      twill::loadJobConfig(jobPath, overrides);
  if (!config) {
    llvm::WithColor::error(llvm::errs(), "twillc")
        << llvm::toString(config.takeError()) << "\n";
    return 1;
  }

  switch (emit) {
  case Emit::Config: {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*config, &text);
    llvm::outs() << "# Resolved from " << jobPath;
    for (const std::string &assignment : overrides)
      llvm::outs() << " " << assignment;
    llvm::outs() << "\n" << text;
    return 0;
  }
  case Emit::Mlir: {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module =
        twill::buildLlamaModule(context, *config);
    module->print(llvm::outs());
    return 0;
  }
  }
  return 0;
}
