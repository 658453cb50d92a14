//===- Job.cpp - one rank's run of a compiled job -------------------------===//

#include "runtime/train/Job.h"

#include "runtime/io/Safetensors.h"
#include "runtime/train/Adapter.h"
#include "runtime/train/Batch.h"
#include "runtime/train/Reference.h"
#include "runtime/train/Weights.h"
#include "support/Dpo.h"
#include "support/ReadFile.h"
#include "support/RunLock.h"
#include "support/RunWatchdog.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/xxhash.h"

#include <numeric>

using namespace twill;

/// Prints "twill-train: error: <message>" in one write, so that the lines
/// of several ranks sharing a terminal do not interleave.
void twill::printError(const llvm::Twine &message) {
  std::string line;
  llvm::raw_string_ostream os(line);
  llvm::WithColor::error(os, "twill-train") << message << "\n";
  llvm::errs() << line;
}

void JobRun::markEnd(int status) {
  if (runEnd)
    markRunEnded(runEnd->folder, options.runLockToken, runEnd->rank, status);
}

/// Reports an error of this rank. With several ranks the others may be
/// waiting in a collective, so the whole job ends here rather than hang.
int JobRun::fail(const llvm::Twine &message) {
  printError(message);
  markEnd(1);
  if (Communicator::launchedRanks() > 1)
    Communicator::abortAll();
  return 1;
}

llvm::raw_ostream &JobRun::report() {
  return isFirstRank ? llvm::outs() : llvm::nulls();
}

int JobRun::fail(llvm::Error error) {
  return fail(llvm::toString(std::move(error)));
}

/// Where a warning goes: stderr on rank 0, marked as one.
llvm::raw_ostream &JobRun::warn() {
  return isFirstRank ? llvm::WithColor::warning(llvm::errs(), "twill-train")
                     : llvm::nulls();
}

/// Writes the buffers `select` picks, named as it says, to `path`: whole
/// tensors, put together from every rank's blocks; rank 0 writes.
static llvm::Error
writeBuffers(Program &program, llvm::StringRef path,
             llvm::function_ref<std::string(int id)> select) {
  std::vector<std::vector<float>> values;
  std::vector<io::NamedTensor> tensors;
  for (int id = 0; id < program.executable().buffers_size(); ++id) {
    std::string name = select(id);
    if (name.empty())
      continue;
    llvm::Expected<BufferBlock> block = program.block(id);
    if (!block)
      return block.takeError();
    llvm::Expected<std::vector<float>> whole = program.wholeTensor(id);
    if (!whole)
      return whole.takeError();
    values.push_back(std::move(*whole));
    tensors.push_back({name, block->globalShape, values.back()});
  }
  if (!program.writesFiles())
    return llvm::Error::success();
  return io::writeSafetensors(path, tensors);
}

/// --write-base: the base as the program holds it, into its folder.
int JobRun::writeBase(Program &program) {
  if (llvm::Error error =
          writeHfModel(program, options.writeBasePath, HfWeights::Held))
    return fail(std::move(error));
  if (program.writesFiles())
    llvm::outs() << "base written to " << options.writeBasePath << "\n";
  return 0;
}

/// One batch through @forward (or, for gradients, @train_step).
int JobRun::runEval(Program &program, llvm::StringRef baseDir) {
  if (options.batchPath.empty())
    return fail("--eval needs --batch batch.json");
  EntryRole role = options.gradientsPath.empty() ? FORWARD : TRAIN_STEP;
  const EntryPoint *entry = program.entryPoint(role);
  if (!entry)
    return fail(options.executablePath + ": has no " +
                llvm::StringRef(EntryRole_Name(role)).lower() + " entry point");
  if (llvm::Error error = loadBatchJson(program, options.batchPath))
    return fail(std::move(error));
  // DPO with a precomputed reference: the batch's, as a run's first pass
  // from the base would compute it — with a new adapter, not the --adapter
  // training made, which is read after; a full fine-tune's --weights are
  // not the model before training.
  if (program.entryPoint(REFERENCE)) {
    if (program.job().has_full_finetune() && !options.weightsPath.empty())
      return fail("--eval --batch of a full fine-tune's DPO program computes "
                  "its reference from the weights it reads, and --weights "
                  "are not the model before training: evaluate with the "
                  "base (leave --weights out)");
    auto load = [&](llvm::StringRef adapter) -> llvm::Error {
      if (llvm::Expected<uint64_t> read =
              loadParameters(program, baseDir, adapter);
          !read)
        return read.takeError();
      return program.uploadState();
    };
    bool adapted = !options.adapterPath.empty();
    if (adapted)
      if (llvm::Error error = load(""))
        return fail(std::move(error));
    if (llvm::Error error = computeBatchReference(program))
      return fail(std::move(error));
    if (adapted)
      if (llvm::Error error = load(options.adapterPath))
        return fail(std::move(error));
  }
  // With LoRA dropout, @train_step drops what the run's first micro-batch
  // would (its masks are keyed by the micro-batch's number).
  if (int micro = program.inputOf(MICRO_BATCH); micro >= 0)
    *program.buffers().as<int64_t>(micro) = 0;
  // The gradients written are of the batch's summed loss, whatever a
  // training step weights it by (DPO's 1 / pairs).
  if (int weight = program.inputOf(LOSS_WEIGHT); weight >= 0)
    *program.buffers().as<float>(weight) = 1.0f;
  if (llvm::Error error = program.run(*entry))
    return fail(std::move(error));
  int lossOutput = Program::outputOf(*entry, LOSS_SUM),
      countOutput = Program::outputOf(*entry, TOKEN_COUNT);
  if (lossOutput < 0 || countOutput < 0)
    return fail(options.executablePath + ": its " + entry->name() +
                " returns no loss sum and token count");
  float lossSum = *program.buffers().as<float>(lossOutput);
  int64_t tokens = *program.buffers().as<int64_t>(countOutput);
  // Under DPO the count is the pairs, and the step also sums TRL's
  // metrics over them.
  int dpoMetrics = Program::outputOf(*entry, DPO_METRICS);
  report() << llvm::formatv("loss {0:f6} (sum {1:f6} over {2} {3})\n",
                            tokens ? lossSum / tokens : 0.0f, lossSum, tokens,
                            dpoMetrics >= 0 ? "pairs" : "tokens");
  if (int aux = Program::outputOf(*entry, ROUTER_AUX_LOSS); aux >= 0)
    report() << llvm::formatv("router_aux_loss {0:f6}\n",
                              *program.buffers().as<float>(aux));
  if (dpoMetrics >= 0 && tokens) {
    for (int m = 0; m < dpo::kMetrics; ++m)
      report() << llvm::formatv("{0} {1:f6}\n", dpo::kMetricNames[m],
                                program.buffers().as<float>(dpoMetrics)[m] /
                                    double(tokens));
  }
  // The step sums gradients into each trainable parameter's gradient sum
  // state, zero before this one step: they hold its gradients.
  if (!options.gradientsPath.empty())
    if (llvm::Error error = writeGradients(program, options.gradientsPath))
      return fail(std::move(error));
  if (!options.dumpLogitsPath.empty()) {
    // The host reads the logits of @forward (the train step keeps none).
    const EntryPoint *forward = program.entryPoint(FORWARD);
    if (forward && forward != entry)
      if (llvm::Error error = program.run(*forward))
        return fail(std::move(error));
    int logits = forward ? program.hostReadBuffer(*forward) : -1;
    if (logits < 0)
      return fail(options.executablePath +
                  ": its forward pass computes no logits for the host to read");
    if (llvm::Error error =
            writeBuffers(program, options.dumpLogitsPath, [&](int id) {
              return id == logits ? std::string("logits") : std::string();
            }))
      return fail(std::move(error));
  }
  return 0;
}

/// What the model training starts from is beyond its base, as a kept DPO
/// reference names it: the adapter --adapter gives (its file's hash), or
/// nothing (a new adapter adds nothing, B = 0; a full fine-tune's model is
/// its base).
llvm::Expected<std::string> JobRun::startingAdapter() {
  if (options.adapterPath.empty())
    return std::string();
  llvm::SmallString<256> path(options.adapterPath);
  llvm::sys::path::append(path, "adapter_model.safetensors");
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> file =
      readRegularFile(path, kMaxDataBytes, "the starting adapter");
  if (!file)
    return file.takeError();
  return llvm::formatv("adapter {0:x16}",
                       llvm::xxh3_64bits((*file)->getBuffer()))
      .str();
}

/// Where training starts: a checkpoint's position under --resume, else a
/// new run, into a folder no earlier run's results are in (or that may be
/// overwritten).
llvm::Expected<TrainPosition> JobRun::startingPosition(Program &program) {
  const JobConfig &job = program.job();
  TrainPosition start;
  if (!options.resumePath.empty()) {
    llvm::Expected<TrainPosition> resumed =
        loadCheckpoint(program, options.resumePath);
    if (!resumed)
      return resumed.takeError();
    start = *resumed;
    report() << llvm::formatv(
        "resuming from {0}: after step {1} (epoch "
        "{2}, step {3} of it next){4}\n",
        start.checkpoint, start.steps, start.epoch + 1, start.index + 1,
        start.passedBy.empty() ? ""
                               : "; the folder's " + start.passedBy +
                                     " is another run's, which saved "
                                     "before this one");
  } else {
    start.run = newRunId();
    if (program.writesFiles()) {
      llvm::Expected<std::string> earlier =
          checkNoEarlierRun(job.checkpoint().output_dir(),
                            job.checkpoint().overwrite_output_dir());
      if (!earlier)
        return earlier.takeError();
      if (!earlier->empty())
        report() << *earlier << "\n";
    }
  }
  return start;
}

/// DPO: what the job's reference says before training, and its
/// precomputed passes over the data (or an earlier run's).
llvm::Error JobRun::prepareReference(Program &program, TrainingData &data,
                                     const TrainPosition &start) {
  const JobConfig &job = program.job();
  // ADAPTER_OFF's reference is the base, whatever adapter training starts
  // from; TRL's is that adapter (PRECOMPUTED's).
  if (job.train().objective() == TrainConfig::DPO && job.has_lora() &&
      job.dpo().reference() == DpoConfig::ADAPTER_OFF &&
      !options.adapterPath.empty())
    report() << "dpo.reference ADAPTER_OFF: the reference is the base with "
                "the adapter off, not the adapter training starts from ("
             << options.adapterPath
             << "), which TRL's reference is (dpo.reference PRECOMPUTED)\n";
  // DPO with a precomputed reference: its first pass over the data (or
  // the training rows' from an earlier run's file).
  if (program.entryPoint(REFERENCE)) {
    const std::string &outputDir = job.checkpoint().output_dir();
    if (program.writesFiles())
      if (std::error_code error = llvm::sys::fs::create_directories(outputDir))
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "cannot create " + outputDir + ": " +
                                           error.message());
    // The reference is the model as training starts: a resumed run's
    // parameters are trained, and it reads the first run's passes.
    llvm::Expected<std::string> startingModel = startingAdapter();
    if (!startingModel)
      return startingModel.takeError();
    bool resumed = !start.checkpoint.empty();
    auto pass = [&](std::vector<Row> &rows, llvm::ArrayRef<int64_t> read,
                    llvm::StringRef file) -> llvm::Error {
      llvm::SmallString<256> cache(outputDir);
      llvm::sys::path::append(cache, file);
      // A run resumed into another folder reads the pass its checkpoint's
      // run kept beside it.
      if (resumed && !llvm::sys::fs::exists(cache)) {
        llvm::SmallString<256> beside(
            llvm::sys::path::parent_path(start.checkpoint));
        llvm::sys::path::append(beside, file);
        if (llvm::sys::fs::exists(beside))
          cache = beside;
      }
      return precomputeReference(program, rows, read, cache, *startingModel,
                                 resumed, report());
    };
    if (llvm::Error error = pass(
            data.rows, rowsRead(job, data.rows.size(), start), kReferenceFile))
      return error;
    std::vector<int64_t> everyEvalRow(data.evalRows.size());
    std::iota(everyEvalRow.begin(), everyEvalRow.end(), 0);
    if (!data.evalRows.empty())
      if (llvm::Error error =
              pass(data.evalRows, everyEvalRow, kEvalReferenceFile))
        return error;
  }
  return llvm::Error::success();
}

/// What a run did, how fast, in how much memory, and where the result is.
void JobRun::reportTrained(const JobConfig &job, const TrainResult &done) {
  report() << llvm::formatv(
      "trained {0} steps{1} in {2:f1} s: {3} tokens ({4} {9}), {5:f0} "
      "tokens/s on average; peak memory {6:f2} GiB ({7}); {8}\n",
      done.steps,
      done.skipped ? llvm::formatv(" ({0} without a labelled token: no "
                                   "update)",
                                   done.skipped)
                         .str()
                   : std::string(),
      done.seconds, done.positions, done.labelled,
      done.seconds > 0 ? done.positions / done.seconds : 0.0,
      done.peakMemory.bytes / double(1 << 30), done.peakMemory.what,
      job.checkpoint().save_final()
          ? llvm::formatv("{0} written to {1}",
                          job.has_full_finetune() ? "model" : "adapter",
                          job.checkpoint().output_dir())
                .str()
          : std::string("nothing written (checkpoint.save_final: false)"),
      // What the step's count counts: labelled tokens, or DPO's pairs.
      job.train().objective() == TrainConfig::DPO ? "pairs" : "labelled");
}

/// The held-out figures after training beside `before`'s.
llvm::Error JobRun::reportEvaluation(Program &program,
                                     llvm::ArrayRef<Row> evalRows,
                                     const Evaluation &before) {
  llvm::Expected<Evaluation> after = evaluate(program, evalRows);
  if (!after)
    return after.takeError();
  if (after->pairs) // DPO: TRL's reward figures, before and after
    report() << llvm::formatv(
        "eval rewards/accuracies {0:f3} -> {1:f3}, rewards/margins {2:f4} "
        "-> {3:f4}, loss {4:f4} -> {5:f4} ({6} pairs)\n",
        before.dpoMetrics[2], after->dpoMetrics[2], before.dpoMetrics[3],
        after->dpoMetrics[3], before.loss, after->loss, after->pairs);
  else
    report() << llvm::formatv(
        "eval next-token accuracy {0:f1}% -> {1:f1}%, loss {2:f3} -> {3:f3} "
        "({4} tokens)\n",
        100 * before.accuracy, 100 * after->accuracy, before.loss, after->loss,
        after->tokens);
  return llvm::Error::success();
}

int JobRun::runTraining(Program &program, TrainingData &data) {
  llvm::Expected<TrainPosition> start = startingPosition(program);
  if (!start)
    return fail(start.takeError());
  if (llvm::Error error = prepareReference(program, data, *start))
    return fail(std::move(error));
  std::optional<Evaluation> before;
  if (!options.evalDataPath.empty()) {
    llvm::Expected<Evaluation> measured = evaluate(program, data.evalRows);
    if (!measured)
      return fail(measured.takeError());
    before = *measured;
  }
  llvm::Expected<TrainResult> result =
      train(program, data.rows, data.source, report(), *start);
  if (!result)
    return fail(result.takeError());
  reportTrained(program.job(), *result);
  if (before)
    if (llvm::Error error = reportEvaluation(program, data.evalRows, *before))
      return fail(std::move(error));
  return 0;
}

/// Writes this rank's trace to --profile's path; with several ranks, rank
/// r's goes beside it as NAME.rank<r>.json.
llvm::Error JobRun::writeProfile(const Profiler &profiler, int rank,
                                 int worldSize) {
  llvm::SmallString<256> path(options.profilePath);
  if (worldSize > 1) {
    std::string extension = llvm::sys::path::extension(path).str();
    llvm::sys::path::replace_extension(
        path, llvm::formatv(".rank{0}{1}", rank, extension).str());
  }
  if (llvm::Error error = profiler.writeTrace(path, rank))
    return error;
  report() << "profile: trace written to " << path << "\n";
  return llvm::Error::success();
}

/// The communicator of the executable's mesh (1 x 1 when it has none).
static llvm::Expected<std::unique_ptr<Communicator>>
makeCommunicator(const Executable &executable) {
  if (executable.meshes_size() == 0)
    return Communicator::create({"dp", "tp"}, {1, 1});
  const Mesh &mesh = executable.meshes(0);
  std::vector<std::string> axes(mesh.axes().begin(), mesh.axes().end());
  std::vector<int64_t> shape(mesh.shape().begin(), mesh.shape().end());
  return Communicator::create(axes, shape);
}

int JobRun::run(Executable executable) {
  llvm::Expected<std::unique_ptr<Communicator>> comm =
      makeCommunicator(executable);
  if (!comm) {
    // Every rank sees the same mismatch: each says so and ends cleanly.
    printError(llvm::toString(comm.takeError()));
    return 1;
  }
  isFirstRank = (*comm)->rank() == 0;
  // Training writes the output folder (its log, checkpoints, adapter):
  // one run at a time. Rank 0 writes it, so rank 0 holds it.
  std::optional<RunLock> lock;
  if (!options.evalOnly && isFirstRank) {
    llvm::Expected<RunLock> taken = RunLock::take(
        executable.job().checkpoint().output_dir(), options.runLockToken);
    if (!taken)
      return fail(taken.takeError());
    lock.emplace(std::move(*taken));
  }
  if (!options.evalOnly && !options.runLockToken.empty()) {
    runEnd =
        RunEnd{executable.job().checkpoint().output_dir(), (*comm)->rank()};
    markRankStarted(runEnd->folder, runEnd->rank);
  }
  (*comm)->setTimeout(executable.job().parallel().collective_timeout_s());
  Program program(std::move(executable), comm->get());
  std::string baseDir = options.weightsPath.empty()
                            ? program.job().checkpoint().base_dir()
                            : options.weightsPath;
  if (!options.writeBasePath.empty())
    if (llvm::Error error =
            checkNewModelFolder("--write-base", options.writeBasePath, baseDir))
      return fail(std::move(error));
  const MemoryPlan &plan = program.buffers().plan();
  report() << llvm::formatv(
      "memory: {0:f1} MiB of computed values share a "
      "{1:f1} MiB arena; with the rest the program "
      "needs {2:f1} MiB ({3} B), and an evaluation "
      "{4} B more for the logits{5}\n",
      plan.unsharedBytes / 1048576.0, plan.arenaBytes / 1048576.0,
      (plan.arenaBytes + plan.ownBytes) / 1048576.0,
      plan.arenaBytes + plan.ownBytes, plan.hostReadBytes,
      plan.hostArenaBytes ? llvm::formatv("; {0} B of host memory hold the "
                                          "offloaded activations",
                                          plan.hostArenaBytes)
                                .str()
                          : std::string());
  if (llvm::Error error = program.useBackend(options.backend))
    return fail(std::move(error));
  if (llvm::Error error = program.checkHostMemory())
    return fail(std::move(error));
  TrainingData data;
  if (!options.evalOnly && options.writeBasePath.empty()) {
    llvm::Expected<TrainingData> read = readTrainingData(
        program.job(), options.dataPath, options.evalDataPath,
        DataLog{report(), [this]() -> llvm::raw_ostream & { return warn(); }});
    if (!read)
      return fail(read.takeError());
    data = std::move(*read);
  }
  std::optional<Profiler> profiler;
  if (!options.profilePath.empty()) {
    profiler.emplace(program.executable());
    program.profileInto(&*profiler);
  }
  llvm::Expected<uint64_t> bytesRead =
      loadParameters(program, baseDir, options.adapterPath);
  if (!bytesRead)
    return fail(bytesRead.takeError());
  if (llvm::Error error = program.uploadState())
    return fail(std::move(error));
  if (*bytesRead) // every rank says what it read: only its blocks
    llvm::outs() << llvm::formatv("rank {0}/{1}: read {2} bytes of "
                                  "checkpoint tensors\n",
                                  (*comm)->rank(), (*comm)->worldSize(),
                                  *bytesRead)
                        .str();
  int status = !options.writeBasePath.empty() ? writeBase(program)
               : options.evalOnly             ? runEval(program, baseDir)
                                              : runTraining(program, data);
  if (status == 0) {
    // Every rank reaches the end before MPI_Finalize, which would wait
    // without a deadline for a rank that stopped late in the job.
    if (llvm::Error error = (*comm)->barrier())
      return fail(std::move(error));
    if (std::string memory = program.memoryReport(); !memory.empty())
      report() << memory << "\n";
    if (profiler) {
      if (llvm::Error error =
              writeProfile(*profiler, (*comm)->rank(), (*comm)->worldSize()))
        return fail(std::move(error));
      profiler->printSummary(report());
    }
  }
  return status;
}

int JobRun::run() {
  llvm::Expected<Executable> executable =
      loadExecutable(options.executablePath);
  return executable ? run(std::move(*executable))
                    : fail(executable.takeError());
}
