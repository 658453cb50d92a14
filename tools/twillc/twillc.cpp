//===- twillc.cpp - compile a Twill job -----------------------------------===//
//
//   twillc JOB.textproto [field.path=value ...] -o job.twx
//   twillc JOB.textproto [field.path=value ...] --emit=config|mlir
//
// Resolves the job (textproto, the model folder's config.json, overrides,
// defaults), validates it and compiles it into an Executable for
// twill-train. `--emit=config` prints the resolved job instead, so a user
// sees exactly what will run, and `--emit=mlir` the traced program.
//
//===----------------------------------------------------------------------===//

#include "frontend/LlamaBuilder.h"
#include "frontend/config/JobConfig.h"

#include "dialects/twill/TwillOps.h"
#include "google/protobuf/text_format.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "passes/ResourceReport.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace {
enum class Emit { Executable, Config, Mlir };
} // namespace

static cl::OptionCategory options("twillc options");

static cl::opt<std::string> jobPath(cl::Positional, cl::Required,
                                    cl::desc("<job.textproto>"),
                                    cl::cat(options));
static cl::list<std::string> overrides(cl::Positional,
                                       cl::desc("[field.path=value ...]"),
                                       cl::cat(options));
static cl::opt<std::string>
    outputPath("o", cl::desc("Where to write the Executable"),
               cl::value_desc("job.twx"), cl::init("job.twx"),
               cl::cat(options));
static cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"), cl::init(Emit::Executable),
    cl::values(clEnumValN(Emit::Executable, "executable",
                          "the compiled program for twill-train (the default)"),
               clEnumValN(Emit::Config, "config",
                          "the resolved, validated job config (textproto)"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the compiled program in the twill dialect")),
    cl::cat(options));

static cl::opt<mlir::twill::Stage> stage(
    "mlir-stage", cl::desc("With --emit=mlir: how far to compile"),
    cl::init(mlir::twill::Stage::Partitioned),
    cl::values(clEnumValN(mlir::twill::Stage::Differentiated, "differentiated",
                          "global program: train step and optimizer"),
               clEnumValN(mlir::twill::Stage::Placed, "placed",
                          "every value with its placement on the mesh"),
               clEnumValN(mlir::twill::Stage::Partitioned, "partitioned",
                          "one rank's program with its collectives (the "
                          "default)"),
               clEnumValN(mlir::twill::Stage::Planned, "planned",
                          "with its memory plan: what is emitted")),
    cl::cat(options));

static cl::opt<bool>
    report("report",
           cl::desc("Print each rank's memory (parameters, gradients, "
                    "optimizer state) and communication per step, from the "
                    "partitioned program; needs no weights"),
           cl::cat(options));

static cl::opt<double> reportTflops(
    "report-tflops",
    cl::desc("With --report: the matmul and attention rate the overlap "
             "estimate assumes, in TFLOP/s"),
    cl::init(mlir::twill::ResourceReport::Rates().flopsPerSecond / 1e12),
    cl::cat(options));
static cl::opt<double> reportGbps(
    "report-gbps",
    cl::desc("With --report: the bandwidth per rank the overlap estimate "
             "assumes for collectives, in GB/s"),
    cl::init(mlir::twill::ResourceReport::Rates().bytesPerSecond / 1e9),
    cl::cat(options));

static int fail(llvm::Twine message) {
  llvm::WithColor::error(llvm::errs(), "twillc") << message << "\n";
  return 1;
}

/// Traces `config` and runs the compile pipeline on it.
static mlir::OwningOpRef<mlir::ModuleOp>
compile(mlir::MLIRContext &context, const twill::JobConfig &config,
        mlir::twill::Stage until = mlir::twill::Stage::Planned) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      twill::buildLlamaModule(context, config);
  mlir::PassManager pm(&context);
  mlir::twill::buildCompilePipeline(pm, config, until);
  if (mlir::failed(pm.run(*module)))
    return nullptr;
  return module;
}

/// Compiles `config` and writes the Executable to `path` (replacing it only
/// once the new one is complete).
static int writeExecutable(const twill::JobConfig &config,
                           llvm::StringRef path) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, config);
  if (!module)
    return fail("cannot compile the job");
  mlir::FailureOr<twill::Executable> executable =
      mlir::twill::emitExecutable(*module);
  if (mlir::failed(executable))
    return fail("cannot compile the job");
  *executable->mutable_job() = config;
  std::string bytes;
  if (!executable->SerializeToString(&bytes))
    return fail("cannot serialise the Executable");
  llvm::Expected<llvm::sys::fs::TempFile> temp =
      llvm::sys::fs::TempFile::create(path + "-%%%%%%.tmp");
  if (!temp)
    return fail("cannot write " + path + ": " +
                llvm::toString(temp.takeError()));
  llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
  os << bytes;
  os.flush();
  if (os.has_error()) {
    os.clear_error();
    llvm::consumeError(temp->discard());
    return fail("cannot write " + path);
  }
  if (llvm::Error error = temp->keep(path))
    return fail("cannot write " + path + ": " +
                llvm::toString(std::move(error)));
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // --help lists these, not the LLVM internals linked in.
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv, "Twill job compiler\n");

  llvm::Expected<twill::JobConfig> config =
      twill::loadJobConfig(jobPath, overrides);
  if (!config)
    return fail(llvm::toString(config.takeError()));

  if (report) {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, *config);
    if (!module)
      return fail("cannot compile the job");
    if (!(reportTflops > 0) || !(reportGbps > 0))
      return fail("--report-tflops and --report-gbps must be positive");
    mlir::FailureOr<mlir::twill::ResourceReport> figures =
        mlir::twill::reportResources(
            *module, config->train().gradient_accumulation_steps(),
            {reportTflops * 1e12, reportGbps * 1e9});
    if (mlir::failed(figures))
      return fail("cannot report on the job");
    // What collectives in flight cost in memory: the same job, waited.
    if (config->parallel().overlap_communication() &&
        config->parallel().dp() * config->parallel().tp() > 1) {
      twill::JobConfig waited = *config;
      waited.mutable_parallel()->set_overlap_communication(false);
      mlir::MLIRContext waitedContext;
      mlir::OwningOpRef<mlir::ModuleOp> waitedModule =
          compile(waitedContext, waited);
      if (!waitedModule)
        return fail("cannot compile the job");
      if (auto arena = (*waitedModule)
                           ->getAttrOfType<mlir::IntegerAttr>(
                               mlir::twill::kArenaBytesAttrName))
        figures->waitedArenaBytes = arena.getInt();
    }
    figures->print(llvm::outs());
    return 0;
  }

  switch (emit) {
  case Emit::Executable:
    return writeExecutable(*config, outputPath);
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
    mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, *config, stage);
    if (!module)
      return fail("cannot compile the job");
    module->print(llvm::outs());
    return 0;
  }
  }
  return 0;
}
