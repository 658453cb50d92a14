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

#include "frontend/DecoderBuilder.h"
#include "frontend/config/ClusterConfig.h"
#include "frontend/config/JobConfig.h"
#include "proto/TrainRows.h"
#include "support/ToolOutput.h"

#include "dialects/twill/TwillOps.h"
#include "google/protobuf/text_format.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "passes/Passes.h"
#include "passes/ResourceReport.h"
#include "proto/ExecutableChecksum.h"
#include "support/AtomicFile.h"
#include "support/Sha256File.h"
#include "tools/twillc/Planner.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <tuple>

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
    outputPath("o",
               cl::desc("Where to write the Executable (with --emit=config "
                        "or --emit=mlir: the text; standard output without "
                        "-o)"),
               cl::value_desc("job.twx"), cl::init("job.twx"),
               cl::cat(options));
static cl::opt<Emit> emit(
    "emit", cl::desc("What to produce"), cl::init(Emit::Executable),
    cl::values(clEnumValN(Emit::Executable, "executable",
                          "the compiled program for twill-train (the default)"),
               clEnumValN(Emit::Config, "config",
                          "the resolved, validated job config (textproto)"),
               clEnumValN(Emit::Mlir, "mlir",
                          "the compiled program in the twill dialect, one "
                          "rank's (--mlir-stage says how far compiled)")),
    cl::cat(options));

static cl::opt<mlir::twill::Stage> stage(
    "mlir-stage", cl::desc("With --emit=mlir: how far to compile"),
    cl::init(mlir::twill::Stage::Partitioned),
    cl::values(clEnumValN(mlir::twill::Stage::Traced, "traced",
                          "the model's forward as traced, before anything "
                          "is differentiated (what twill-opt's passes take)"),
               clEnumValN(mlir::twill::Stage::Differentiated, "differentiated",
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
    timing("timing",
           cl::desc("Print, to stderr, the time each compile spends tracing "
                    "the model and in each pass"),
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
    cl::init(mlir::twill::ResourceReport::Rates().link.bytesPerSecond / 1e9),
    cl::cat(options));

static cl::opt<bool> plan(
    "plan",
    cl::desc("Choose the mesh, activation checkpointing and micro-batch for "
             "--cluster: print the best candidates by predicted tokens/s per "
             "device and write the winner as a job to -o (default "
             "plan.textproto)"),
    cl::cat(options));
static cl::opt<std::string>
    clusterPath("cluster",
                cl::desc("With --plan, or --report: the cluster (a textproto "
                         "of proto/cluster.proto; clusters/ has some) whose "
                         "rates the cost estimate takes"),
                cl::value_desc("cluster.textproto"), cl::cat(options));
static cl::opt<int> planRows("plan-rows",
                             cl::desc("With --plan: how many candidates to "
                                      "print"),
                             cl::init(12), cl::cat(options));

static cl::opt<double> deviceMemoryGb(
    "device-memory-gb",
    cl::desc("With --report: also find the longest train.seq_len whose "
             "program fits this much memory per rank (GB of 1e9 bytes; "
             "default: parallel.memory_budget_gb)"),
    cl::init(0), cl::cat(options));

// Hooks for tests (hidden): the frontend's TraceOptions.
static cl::opt<std::string> testParameterPrefix(
    "test-parameter-prefix",
    cl::desc("Put this before every parameter's name (a test that nothing "
             "reads meaning into names)"),
    cl::Hidden, cl::cat(options));
static cl::opt<bool> testZeroOnes(
    "test-zero-ones",
    cl::desc("Parameters that start at 1 start at 0 (a test initialiser)"),
    cl::Hidden, cl::cat(options));

static int fail(llvm::Twine message) {
  llvm::WithColor::error(llvm::errs(), "twillc") << message << "\n";
  return 1;
}

/// Traces `config` and runs the compile pipeline on it.
static mlir::OwningOpRef<mlir::ModuleOp>
compile(mlir::MLIRContext &context, const twill::JobConfig &config,
        mlir::twill::Stage until = mlir::twill::Stage::Planned) {
  mlir::DefaultTimingManager timer;
  timer.setEnabled(timing);
  mlir::TimingScope root = timer.getRootScope();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    mlir::TimingScope tracing = root.nest("trace (frontend/DecoderBuilder)");
    module = twill::buildDecoderModule(
        context, config, {testParameterPrefix.getValue(), testZeroOnes});
  }
  mlir::PassManager pm(&context);
  pm.enableTiming(root);
  mlir::twill::buildCompilePipeline(pm, config, until);
  if (mlir::failed(pm.run(*module)))
    return nullptr;
  return module;
}

/// The rates --report-tflops and --report-gbps give the cost estimate.
static mlir::twill::ResourceReport::Rates flagRates() {
  mlir::twill::ResourceReport::Rates rates;
  rates.flopsPerSecond = reportTflops * 1e12;
  rates.link.bytesPerSecond = reportGbps * 1e9;
  return rates;
}

/// The report on `config`, compiled (failure: it does not compile). With
/// `alone`, the compile uses no threads of its own: the planner runs
/// several at once.
static mlir::FailureOr<mlir::twill::ResourceReport>
reportOn(const twill::JobConfig &config,
         const mlir::twill::ResourceReport::Rates &rates = flagRates(),
         bool alone = false) {
  mlir::MLIRContext context(alone ? mlir::MLIRContext::Threading::DISABLED
                                  : mlir::MLIRContext::Threading::ENABLED);
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, config);
  if (!module)
    return mlir::failure();
  return mlir::twill::reportResources(
      *module, config.train().gradient_accumulation_steps(), rates);
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

/// 141, 0.00497: GB as a person writes them (4 significant digits).
static std::string gbText(double gb) {
  return llvm::formatv("{0}", llvm::format("%.4g", gb)).str();
}

/// `config` holding activations the way parallel.memory_budget_gb's search
/// tries: FULL checkpointing of the first `recomputed` layers (0: none),
/// and the inputs of the first `offloaded` of them in host memory (-1:
/// every value the backward reads of the forward).
static twill::JobConfig holdingActivations(twill::JobConfig config,
                                           int64_t recomputed,
                                           int64_t offloaded) {
  twill::ParallelConfig &parallel = *config.mutable_parallel();
  parallel.set_activation_checkpointing(
      recomputed ? twill::ParallelConfig::FULL : twill::ParallelConfig::NONE);
  parallel.set_checkpoint_layers(recomputed);
  parallel.set_offload_activations(offloaded != 0);
  parallel.set_offload_layers(offloaded);
  return config;
}

/// The least of 1..`most` for which `fits` holds (it holds for `most`, and
/// for every count above the least: more layers recomputed or offloaded
/// never need more memory).
static int64_t fewestFitting(int64_t most,
                             llvm::function_ref<bool(int64_t)> fits) {
  int64_t low = 0, high = most; // !fits(low) (or 0); fits(high)
  while (high - low > 1) {
    int64_t middle = low + (high - low) / 2;
    (fits(middle) ? high : low) = middle;
  }
  return high;
}

/// parallel.memory_budget_gb: `config` with the cheapest way of holding
/// activations whose program fits the budget per rank by its plan: every
/// activation kept; else SELECTIVE checkpointing (norms and SwiGLU
/// recomputed); else FULL checkpointing of the fewest layers (the
/// first ones); else of every layer, and the inputs of the fewest layers
/// offloaded to host memory (recompute costs a layer's forward again,
/// offload its input's copies both ways).
static llvm::Expected<twill::JobConfig>
fitMemoryBudget(const twill::JobConfig &config) {
  double budgetGb = config.parallel().memory_budget_gb();
  if (budgetGb <= 0)
    return config;
  auto needs = [&](const twill::JobConfig &candidate) -> int64_t {
    mlir::FailureOr<mlir::twill::ResourceReport> figures = reportOn(candidate);
    return mlir::succeeded(figures) ? figures->programBytes() : -1;
  };
  int64_t budget = int64_t(budgetGb * 1e9);
  auto fitsAs = [&](const twill::JobConfig &candidate) {
    int64_t bytes = needs(candidate);
    return bytes >= 0 && bytes <= budget;
  };
  auto fits = [&](int64_t recomputed, int64_t offloaded) {
    return fitsAs(holdingActivations(config, recomputed, offloaded));
  };
  int64_t layers = config.model().num_hidden_layers();
  if (fits(0, 0))
    return holdingActivations(config, 0, 0);
  twill::JobConfig selective = holdingActivations(config, 0, 0);
  selective.mutable_parallel()->set_activation_checkpointing(
      twill::ParallelConfig::SELECTIVE);
  selective.mutable_parallel()->set_checkpoint_layers(-1);
  if (fitsAs(selective))
    return selective;
  if (fits(layers, 0))
    return holdingActivations(
        config, fewestFitting(layers, [&](int64_t n) { return fits(n, 0); }),
        0);
  // The inputs of the fewest layers; then also what no layer's backward
  // reads first (-1), which may need more, not less: it brings those
  // values back, each while the layer before it computes.
  if (fits(layers, layers))
    return holdingActivations(
        config, layers,
        fewestFitting(layers, [&](int64_t n) { return fits(layers, n); }));
  if (fits(layers, -1))
    return holdingActivations(config, layers, -1);
  int64_t least = std::min(needs(holdingActivations(config, layers, layers)),
                           needs(holdingActivations(config, layers, -1)));
  if (least < 0)
    return llvm::createStringError("cannot compile " + jobPath +
                                   " (the errors above say why)");
  return llvm::createStringError(llvm::formatv(
      "parallel.memory_budget_gb is {0} GB per rank, and the job needs {1} "
      "GB even with every layer recomputed and its input offloaded to host "
      "memory: lower train.seq_len or train.batch_size, set "
      "parallel.mlp_tile_tokens and parallel.attention_tile_tokens, or use "
      "more ranks (parallel.tp)",
      gbText(budgetGb), gbText(least / 1e9)));
}

/// "layer 0", "layers 0-11": the first `count` layers.
static std::string firstLayers(int64_t count) {
  return count == 1 ? std::string("layer 0")
                    : llvm::formatv("layers 0-{0}", count - 1).str();
}

/// The choice fitMemoryBudget made for `config`, in words.
static std::string memoryBudgetChoice(const twill::JobConfig &config) {
  const twill::ParallelConfig &parallel = config.parallel();
  int64_t layers = config.model().num_hidden_layers();
  std::string choice = llvm::formatv("Memory budget {0} GB per rank: ",
                                     gbText(parallel.memory_budget_gb()))
                           .str();
  if (parallel.activation_checkpointing() == twill::ParallelConfig::NONE)
    return choice + "every activation kept (no recompute)\n";
  if (parallel.activation_checkpointing() == twill::ParallelConfig::SELECTIVE)
    return choice + "each layer's norms and SwiGLU recomputed in the "
                    "backward (SELECTIVE checkpointing), the rest kept\n";
  choice += llvm::formatv("{0} of {1} recomputed in the backward (FULL "
                          "checkpointing)",
                          firstLayers(parallel.checkpoint_layers()), layers)
                .str();
  if (!parallel.offload_activations())
    return choice + (parallel.checkpoint_layers() < layers
                         ? ", the others' activations kept\n"
                         : "\n");
  if (parallel.offload_layers() < 0)
    return choice + ", every value the backward reads of the forward "
                    "offloaded to host memory\n";
  return choice + llvm::formatv(", the input of {0} offloaded to host memory\n",
                                firstLayers(parallel.offload_layers()))
                      .str();
}

/// --report: the figures of `config`; what collectives in flight cost in
/// memory (the same job, waited); with --device-memory-gb, the longest
/// sequence that fits.
static int printReport(const twill::JobConfig &config) {
  for (auto [flag, value, least] :
       {std::tuple<llvm::StringRef, double, llvm::StringRef>{
            "--report-tflops", reportTflops, "positive"},
        {"--report-gbps", reportGbps, "positive"},
        {"--device-memory-gb", deviceMemoryGb, "0 or more"}})
    // At most 1e6 (TFLOP/s, GB/s, GB): a larger one is a typo, and in
    // bytes one past int64 reported that nothing fits.
    if (!(least == "positive" ? value > 0 : value >= 0) || !(value <= 1e6))
      return fail(llvm::formatv("{0} is {1}: it must be {2} and at most 1e6",
                                flag, value, least));
  // The estimate's rates: a cluster's for the job's mesh, else the flags'.
  mlir::twill::ResourceReport::Rates rates = flagRates();
  std::string ratesName;
  if (!clusterPath.empty()) {
    llvm::Expected<twill::ClusterConfig> cluster =
        twill::loadClusterConfig(clusterPath);
    if (!cluster)
      return fail(llvm::toString(cluster.takeError()));
    rates = twill::ratesOn(*cluster, config);
    ratesName =
        cluster->name().empty() ? clusterPath.getValue() : cluster->name();
  }
  mlir::FailureOr<mlir::twill::ResourceReport> figures =
      reportOn(config, rates);
  if (mlir::failed(figures))
    return fail("cannot compile " + jobPath + " (the errors above say why)");
  figures->ratesName = ratesName;
  if (config.parallel().overlap_communication() &&
      config.parallel().dp() * config.parallel().tp() > 1) {
    twill::JobConfig waited = config;
    waited.mutable_parallel()->set_overlap_communication(false);
    mlir::FailureOr<mlir::twill::ResourceReport> waitedFigures =
        reportOn(waited);
    if (mlir::failed(waitedFigures))
      return fail("cannot compile " + jobPath + " (the errors above say why)");
    figures->waitedArenaBytes = waitedFigures->arenaBytes;
  }
  figures->print(llvm::outs());
  const twill::TrainConfig &train = config.train();
  int64_t dp = config.parallel().dp();
  llvm::outs() << llvm::formatv(
      "Batch: train.batch_size {0} is the global micro-batch ({1:f1} rows "
      "per data-parallel rank of {2}) of {3} tokens each; {4} per step\n",
      train.batch_size(), double(train.batch_size()) / dp, dp,
      twill::rowLength(train),
      train.gradient_accumulation_steps() > 1
          ? llvm::formatv("{0} micro-batches",
                          train.gradient_accumulation_steps())
                .str()
          : std::string("one micro-batch"));
  if (config.parallel().memory_budget_gb() > 0)
    llvm::outs() << memoryBudgetChoice(config);
  // By default, the job's own budget; under a budget, the longest sequence
  // is the one that fits with the most memory saved.
  double deviceGb = deviceMemoryGb > 0 ? deviceMemoryGb.getValue()
                                       : config.parallel().memory_budget_gb();
  if (deviceGb > 0) {
    int64_t layers = config.model().num_hidden_layers();
    twill::JobConfig longestOf = config.parallel().memory_budget_gb() > 0
                                     ? holdingActivations(config, layers, -1)
                                     : config;
    int64_t longest = longestFitting(longestOf, int64_t(deviceGb * 1e9));
    llvm::outs() << llvm::formatv(
        "Longest train.seq_len whose program fits {0} GB per rank: ",
        gbText(deviceGb));
    if (longest == 0) {
      llvm::outs() << "none (not even one token)\n";
      return 0;
    }
    twill::JobConfig at = longestOf;
    at.mutable_train()->set_seq_len(longest);
    llvm::outs() << llvm::formatv(
        "{0} (needing {1} B there; the plan's figure: the device's own use, "
        "workspace and scratch come on top)\n",
        longest, reportOn(at)->programBytes());
  }
  return 0;
}

/// Compiles `config` and writes the Executable to `path` (replacing it only
/// once the new one is complete), sealed, and saying which twillc made it.
static int writeExecutable(const twill::JobConfig &config, llvm::StringRef path,
                           const char *argv0) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, config);
  if (!module)
    return fail("cannot compile " + jobPath + " (the errors above say why)");
  mlir::FailureOr<twill::Executable> executable =
      mlir::twill::emitExecutable(*module);
  if (mlir::failed(executable))
    return fail("cannot compile " + jobPath + " (the errors above say why)");
  *executable->mutable_job() = config;
  static int anchor;
  llvm::Expected<std::string> compiler =
      twill::sha256OfFile(llvm::sys::fs::getMainExecutable(argv0, &anchor));
  if (!compiler)
    return fail(llvm::toString(compiler.takeError()));
  executable->set_compiler_sha256(*compiler);
  std::string bytes = twill::sealedBytes(*executable);
  if (llvm::Error error = twill::writeFileAtomically(
          path, [&](llvm::raw_ostream &os) { os << bytes; }))
    return fail(llvm::toString(std::move(error)));
  return 0;
}

/// --emit=config and --emit=mlir: the text to -o when it is given (it was
/// ignored: the file never came), else to standard output.
static int emitText(llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (!outputPath.getNumOccurrences() || outputPath == "-") {
    write(llvm::outs());
    return 0;
  }
  if (llvm::Error error = twill::writeFileAtomically(outputPath, write))
    return fail(llvm::toString(std::move(error)));
  return 0;
}

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twillc");
  llvm::InitLLVM init(argc, argv);
  // --help lists these, not the LLVM internals linked in.
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv, "Twill job compiler\n");
  std::string output = outputPath.getNumOccurrences() || !plan
                           ? outputPath.getValue()
                           : std::string("plan.textproto");
  if (llvm::Error error =
          twill::checkNotAnInput("-o", output, {jobPath, clusterPath}))
    return fail(llvm::toString(std::move(error)));

  llvm::Expected<twill::JobConfig> loaded =
      twill::loadJobConfig(jobPath, overrides);
  if (!loaded)
    return fail(llvm::toString(loaded.takeError()));
  llvm::Expected<twill::JobConfig> config = fitMemoryBudget(*loaded);
  if (!config)
    return fail(llvm::toString(config.takeError()));

  if (report)
    return printReport(*config);
  if (plan) {
    if (clusterPath.empty())
      return fail("--plan needs --cluster FILE (clusters/ has some)");
    if (planRows < 1)
      return fail(llvm::formatv("--plan-rows is {0}: it must be at least 1",
                                planRows.getValue()));
    llvm::Expected<twill::ClusterConfig> cluster =
        twill::loadClusterConfig(clusterPath);
    if (!cluster)
      return fail(llvm::toString(cluster.takeError()));
    return twill::planJob(
        *config, *cluster,
        cluster->name().empty() ? clusterPath.getValue() : cluster->name(),
        output, planRows,
        [](const twill::JobConfig &job,
           const mlir::twill::ResourceReport::Rates &rates) {
          return reportOn(job, rates, /*alone=*/true);
        },
        llvm::outs());
  }

  switch (emit) {
  case Emit::Executable:
    return writeExecutable(*config, outputPath, argv[0]);
  case Emit::Config: {
    std::string text;
    google::protobuf::TextFormat::PrintToString(*config, &text);
    return emitText([&](llvm::raw_ostream &os) {
      os << "# Resolved from " << jobPath;
      for (const std::string &assignment : overrides)
        os << " " << assignment;
      os << "\n" << text;
    });
  }
  case Emit::Mlir: {
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module = compile(context, *config, stage);
    if (!module)
      return fail("cannot compile " + jobPath + " (the errors above say why)");
    return emitText([&](llvm::raw_ostream &os) { module->print(os); });
  }
  }
  return 0;
}
