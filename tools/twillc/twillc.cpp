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

static cl::opt<double> deviceMemoryGb(
    "device-memory-gb",
    cl::desc("With --report: also find the longest train.seq_len whose "
             "program fits this much memory per rank (GB of 1e9 bytes)"),
    cl::init(0), cl::cat(options));

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

/// The report on `config`, compiled (failure: it does not compile).
static mlir::FailureOr<mlir::twill::ResourceReport>
reportOn(const twill::JobConfig &config) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, config);
  if (!module)
    return mlir::failure();
  return mlir::twill::reportResources(
      *module, config.train().gradient_accumulation_steps(),
      {reportTflops * 1e12, reportGbps * 1e9});
}

/// The longest train.seq_len at which `config` needs at most `bytes` per
/// rank by its plan (0: not even one token fits): the memory a program
/// needs grows with its sequence, so doubling finds a length that does
/// not fit, and bisection the last that does.
static int64_t longestFitting(twill::JobConfig config, int64_t bytes) {
  auto fits = [&](int64_t seqLen) {
    config.mutable_train()->set_seq_len(seqLen);
    mlir::FailureOr<mlir::twill::ResourceReport> figures = reportOn(config);
    return mlir::succeeded(figures) && figures->programBytes() <= bytes;
  };
  constexpr int64_t kLongest = int64_t(1) << 31;
  if (!fits(1))
    return 0;
  int64_t low = 1, high = 2; // fits(low); high is still to be tried
  while (high <= kLongest && fits(high)) {
    low = high;
    high *= 2;
  }
  if (high > kLongest)
    return low;
  while (high - low > 1) {
    int64_t middle = low + (high - low) / 2;
    (fits(middle) ? low : high) = middle;
  }
  return low;
}

/// --report: the figures of `config`; what collectives in flight cost in
/// memory (the same job, waited); with --device-memory-gb, the longest
/// sequence that fits.
static int printReport(const twill::JobConfig &config) {
  if (!(reportTflops > 0) || !(reportGbps > 0) || deviceMemoryGb < 0)
    return fail("--report-tflops, --report-gbps and --device-memory-gb must "
                "be positive");
  mlir::FailureOr<mlir::twill::ResourceReport> figures = reportOn(config);
  if (mlir::failed(figures))
    return fail("cannot compile the job");
  if (config.parallel().overlap_communication() &&
      config.parallel().dp() * config.parallel().tp() > 1) {
    twill::JobConfig waited = config;
    waited.mutable_parallel()->set_overlap_communication(false);
    mlir::FailureOr<mlir::twill::ResourceReport> waitedFigures =
        reportOn(waited);
    if (mlir::failed(waitedFigures))
      return fail("cannot compile the job");
    figures->waitedArenaBytes = waitedFigures->arenaBytes;
  }
  figures->print(llvm::outs());
  if (deviceMemoryGb > 0) {
    int64_t bytes = int64_t(deviceMemoryGb * 1e9);
    int64_t longest = longestFitting(config, bytes);
    llvm::outs() << llvm::formatv(
        "Longest train.seq_len whose program fits {0} GB per rank: ",
        deviceMemoryGb.getValue());
    if (longest == 0) {
      llvm::outs() << "none (not even one token)\n";
      return 0;
    }
    twill::JobConfig at = config;
    at.mutable_train()->set_seq_len(longest);
    llvm::outs() << llvm::formatv(
        "{0} (needing {1} B there; the plan's figure: the device's own use, "
        "workspace and scratch come on top)\n",
        longest, reportOn(at)->programBytes());
  }
  return 0;
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

  if (report)
    return printReport(*config);

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
