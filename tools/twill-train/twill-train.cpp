//===- twill-train.cpp - run a compiled Twill job -------------------------===//
//
//   twill-train job.twx [--data train.jsonl] [--eval-data eval.jsonl]
//               [--weights DIR] [--adapter DIR]
//   twill-train job.twx --eval --batch batch.json [--weights DIR]
//               [--adapter DIR] [--dump-logits F] [--gradients F]
//   twill-train job.twx --write-base DIR [--weights DIR]
//
// Reads its flags and runs the job (runtime/train/Job.h): loads the
// Executable that twillc wrote and fills its parameters from a
// Hugging Face checkpoint (and a PEFT adapter to start from). Then either
// trains on JSONL (pre-tokenized, alpaca or chat) and writes the PEFT adapter
// to the job's checkpoint.output_dir, or, with --eval, runs one batch and
// prints its loss (and, with --gradients, the gradients of the summed loss),
// or, with --write-base, writes the base as the program holds it (a
// quantized base in bitsandbytes' 4-bit format) and stops.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Communicator.h"
#include "runtime/train/Job.h"
#include "support/AtomicFile.h"
#include "support/RunLock.h"
#include "support/ToolOutput.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"

#include <cstdlib>
#include <optional>
#include <unistd.h> // pause

namespace cl = llvm::cl;
using namespace twill;

static cl::OptionCategory options("twill-train options");

static cl::opt<std::string> executablePath(cl::Positional, cl::Required,
                                           cl::desc("<job.twx>"),
                                           cl::cat(options));
static cl::opt<std::string>
    weightsPath("weights",
                cl::desc("Hugging Face model folder or .safetensors file "
                         "(default: the job's checkpoint.base_dir)"),
                cl::value_desc("dir"), cl::cat(options));
static cl::opt<std::string>
    adapterPath("adapter", cl::desc("PEFT adapter folder to start from"),
                cl::value_desc("dir"), cl::cat(options));
static cl::opt<std::string>
    dataPath("data",
             cl::desc("Pre-tokenized JSONL to train on (default: the job's "
                      "data.path)"),
             cl::value_desc("train.jsonl"), cl::cat(options));
static cl::opt<std::string> evalDataPath(
    "eval-data",
    cl::desc("Pre-tokenized JSONL to measure next-token accuracy on, before "
             "and after training"),
    cl::value_desc("eval.jsonl"), cl::cat(options));
static cl::opt<std::string>
    backendName("backend",
                cl::desc("Where to compute: cpu (the reference: fp32 "
                         "arithmetic, bf16 values widened) or cuda (this "
                         "rank's GPU, NCCL between ranks)"),
                cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(options));
static cl::opt<std::string> resumePath(
    "resume",
    cl::desc("Continue training from a checkpoint: a step_N folder, or an "
             "output folder (its latest complete checkpoint)"),
    cl::value_desc("dir"), cl::cat(options));
static cl::opt<bool> eval("eval",
                          cl::desc("Run one batch instead of training and "
                                   "print its loss"),
                          cl::cat(options));
static cl::opt<std::string>
    batchPath("batch",
              cl::desc("With --eval: the batch, JSON with tokens, "
                       "labels, positions and segments"),
              cl::value_desc("batch.json"), cl::cat(options));
static cl::opt<std::string>
    dumpLogitsPath("dump-logits",
                   cl::desc("With --eval: write the logits as safetensors"),
                   cl::value_desc("logits.safetensors"), cl::cat(options));
static cl::opt<std::string> profilePath(
    "profile",
    cl::desc("Record every instruction's time: write a Chrome trace (open it "
             "in Perfetto or chrome://tracing; with several ranks, one file "
             "per rank) and print where the time went at the end"),
    cl::value_desc("trace.json"), cl::cat(options));
static cl::opt<std::string> gradientsPath(
    "gradients",
    cl::desc("With --eval: run the training step instead and write the "
             "gradient of the summed loss for every trainable parameter"),
    cl::value_desc("grads.safetensors"), cl::cat(options));
static cl::opt<std::string> writeBasePath(
    "write-base",
    cl::desc("Write the base model as the program holds it to this folder "
             "and stop: a quantized base NF4 in bitsandbytes' 4-bit format "
             "(quantized once, what transformers and later runs load as it "
             "is), every other weight in fp32"),
    cl::value_desc("DIR"), cl::cat(options));
static cl::opt<std::string> runLockToken(
    "run-lock",
    cl::desc("The token of the output folder's run lock that `twill train` "
             "holds for this run"),
    cl::Hidden, cl::cat(options));

/// Flags given where they mean nothing (those of --eval without it, those
/// of training with it), named rather than ignored: the run would fail on
/// something else, or do what was not asked.
static std::optional<std::string> misplacedFlags() {
  using Flag = std::pair<llvm::StringRef, const cl::opt<std::string> *>;
  auto given = [](std::initializer_list<Flag> flags) {
    llvm::SmallVector<llvm::StringRef> names;
    for (auto [name, value] : flags)
      if (!value->empty())
        names.push_back(name);
    return names;
  };
  llvm::SmallVector<llvm::StringRef> names =
      eval ? given({{"--data", &dataPath},
                    {"--eval-data", &evalDataPath},
                    {"--resume", &resumePath}})
           : given({{"--batch", &batchPath},
                    {"--dump-logits", &dumpLogitsPath},
                    {"--gradients", &gradientsPath}});
  if (names.empty())
    return std::nullopt;
  std::string list = llvm::join(names, ", ");
  bool one = names.size() == 1;
  llvm::StringRef belong = one ? "belongs" : "belong",
                  them = one ? "it" : "them";
  if (eval)
    return llvm::formatv("{0} {1} to training, and --eval runs one batch "
                         "without training: leave {2} out, or drop --eval",
                         list, belong, them)
        .str();
  return llvm::formatv("{0} {1} to --eval (one batch, no training): add "
                       "--eval, or leave {2} out to train",
                       list, belong, them)
      .str();
}

/// What the flags ask of the run.
static JobOptions optionsGiven() {
  JobOptions given;
  given.executablePath = executablePath;
  given.weightsPath = weightsPath;
  given.adapterPath = adapterPath;
  given.dataPath = dataPath;
  given.evalDataPath = evalDataPath;
  given.backend = backendName;
  given.resumePath = resumePath;
  given.evalOnly = eval;
  given.batchPath = batchPath;
  given.dumpLogitsPath = dumpLogitsPath;
  given.gradientsPath = gradientsPath;
  given.profilePath = profilePath;
  given.writeBasePath = writeBasePath;
  given.runLockToken = runLockToken;
  return given;
}

int main(int argc, char **argv) {
  twill::checkStandardOutputAtExit("twill-train");
  llvm::InitLLVM init(argc, argv);
  // --help lists these, not the LLVM internals linked in.
  cl::HideUnrelatedOptions(options);
  cl::ParseCommandLineOptions(argc, argv, "Twill job runner\n");
  if (std::optional<std::string> problem = misplacedFlags()) {
    printError(*problem);
    return 1;
  }
  // A checkpoint holds the adapter it trained: one given beside it was
  // read, then silently replaced.
  if (!adapterPath.empty() && !resumePath.empty()) {
    printError("--adapter and --resume both give the adapter to start "
               "from, and the checkpoint's would win: leave --adapter out");
    return 1;
  }
  for (auto [flag, output] : {std::pair{"--profile", &profilePath},
                              {"--dump-logits", &dumpLogitsPath},
                              {"--gradients", &gradientsPath},
                              {"--write-base", &writeBasePath}})
    if (llvm::Error error = checkNotAnInput(
            flag, *output,
            {executablePath, dataPath, evalDataPath, batchPath})) {
      printError(llvm::toString(std::move(error)));
      return 1;
    }
  // Fault injection for the watchdog's test (integrity.py): this rank
  // (by the launcher's numbering) hangs before MPI_Init, which keeps the
  // others in theirs.
  if (const char *rank = std::getenv("TWILL_TEST_HANG_AT_START")) {
    const char *launched = std::getenv("OMPI_COMM_WORLD_RANK");
    if (launched && llvm::StringRef(launched) == rank)
      for (;;)
        pause();
  }
  RunLock::keepFromChildren(runLockToken);
  Communicator::initialize(argc, argv);
  JobRun job(optionsGiven());
  int status = job.run();
  job.markEnd(status);
  // Fault injection for the watchdog's test (integrity.py): this rank
  // hangs once it has ended, as one stuck in MPI_Finalize would.
  if (const char *rank = std::getenv("TWILL_TEST_HANG_AT_END");
      rank && job.watchedRank() && std::to_string(*job.watchedRank()) == rank)
    for (;;)
      pause();
  // After the run: its communicator must go before MPI does.
  Communicator::finalize();
  return status;
}
