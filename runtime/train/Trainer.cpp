//===- Trainer.cpp - the training loop ------------------------------------===//

#include "runtime/train/Trainer.h"

#include "proto/TrainRows.h"

#include "runtime/data/Sampler.h"
#include "runtime/io/TensorBoard.h"
#include "runtime/train/Adapter.h"
#include "runtime/train/Batch.h"
#include "support/AtomicFile.h"
#include "support/Dpo.h"
#include "support/Json.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <array>
#include <chrono>
#include <cmath>

using namespace twill;

static llvm::Error trainError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// `error`, which step `step` met.
static llvm::Error atStep(int64_t step, llvm::Error error) {
  return trainError(
      llvm::formatv("step {0}: {1}", step, llvm::toString(std::move(error))));
}

/// The error that ends a diverged run at `step`: `what` came out
/// non-finite.
static llvm::Error diverged(int64_t step, llvm::StringRef what, double value,
                            llvm::StringRef lastCheckpoint) {
  return trainError(llvm::formatv(
      "step {0}: {1} is {2}: training diverged (lower train.lr, or check the "
      "data); nothing of this step is written{3}",
      step, what, value,
      lastCheckpoint.empty()
          ? std::string("; no checkpoint was saved before it")
          : "; the last good checkpoint is " + lastCheckpoint.str()));
}

/// metrics.jsonl as a run resumed after step `steps` continues it: the lines
/// of the steps after it (written before the run stopped, by the run that
/// is resumed or a later one) go, so that each step is listed once.
static llvm::Error keepMetricsUpTo(llvm::StringRef path, int64_t steps) {
  if (!llvm::sys::fs::exists(path))
    return llvm::Error::success();
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return trainError("cannot read " + path + ": " + file.getError().message());
  std::string kept;
  bool dropped = false;
  llvm::SmallVector<llvm::StringRef> lines;
  (*file)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    llvm::Expected<llvm::json::Value> value = parseJson(line, path);
    std::optional<int64_t> step;
    if (value && value->getAsObject())
      step = value->getAsObject()->getInteger("step");
    else
      llvm::consumeError(value.takeError());
    // A line cut short by the stop is no step's.
    if (!step || *step > steps) {
      dropped = true;
      continue;
    }
    kept += line.str() + "\n";
  }
  if (!dropped)
    return llvm::Error::success();
  return writeFileAtomically(path, [&](llvm::raw_ostream &os) { os << kept; });
}

static double secondsSince(std::chrono::steady_clock::time_point then) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - then)
      .count();
}

/// 42s, 3m05s, 2h07m: a duration as a person reads it.
static std::string duration(double seconds) {
  auto whole = int64_t(seconds + 0.5);
  if (whole < 60)
    return llvm::formatv("{0:f1}s", seconds).str();
  if (whole < 3600)
    return llvm::formatv("{0}m{1}s", whole / 60,
                         llvm::format("%02d", int(whole % 60)))
        .str();
  return llvm::formatv("{0}h{1}m", whole / 3600,
                       llvm::format("%02d", int(whole / 60 % 60)))
      .str();
}

/// Adds DPO's metric sums (output buffer `id`, support/Dpo.h's order) to
/// `sums`.
static void addDpoMetrics(Program &program, int id, double *sums) {
  const float *metrics = program.buffers().as<float>(id);
  for (int m = 0; m < dpo::kMetrics; ++m)
    sums[m] += metrics[m];
}

template <typename T>
static T scalarOutput(Program &program, const EntryPoint &entry,
                      ValueRole role) {
  int id = Program::outputOf(entry, role);
  return id < 0 ? T() : *program.buffers().as<T>(id);
}

Schedule twill::scheduleOf(const TrainConfig &settings, int64_t rows) {
  int64_t accumulation = settings.gradient_accumulation_steps();
  Schedule schedule;
  schedule.microBatchesPerEpoch =
      (rows + settings.batch_size() - 1) / settings.batch_size();
  schedule.stepsPerEpoch =
      (schedule.microBatchesPerEpoch + accumulation - 1) / accumulation;
  if (settings.max_steps_per_epoch() > 0)
    schedule.stepsPerEpoch =
        std::min(schedule.stepsPerEpoch, settings.max_steps_per_epoch());
  schedule.totalSteps = schedule.stepsPerEpoch * settings.epochs();
  return schedule;
}

std::vector<int64_t> twill::rowsRead(const JobConfig &job, int64_t rows,
                                     const TrainPosition &start) {
  const TrainConfig &settings = job.train();
  int64_t perStep =
      settings.batch_size() * settings.gradient_accumulation_steps();
  int64_t stepsPerEpoch = scheduleOf(settings, rows).stepsPerEpoch;
  std::vector<bool> read(rows, false);
  for (int64_t epoch = start.epoch; epoch < settings.epochs(); ++epoch) {
    std::vector<int64_t> order =
        epochOrder(rows, settings.seed(), epoch, job.data().shuffle());
    int64_t first = epoch == start.epoch ? start.index * perStep : 0;
    int64_t end = std::min(rows, stepsPerEpoch * perStep);
    for (int64_t i = first; i < end; ++i)
      read[order[i]] = true;
  }
  std::vector<int64_t> indices;
  for (int64_t row = 0; row < rows; ++row)
    if (read[row])
      indices.push_back(row);
  return indices;
}

namespace {

/// What the micro-batches of one optimizer step summed. SFT: the loss
/// sum and the labelled tokens. DPO (TRL's figures): the sum of the
/// micro-batches' means, the micro-batches with a pair, and the pairs.
struct StepSums {
  double loss = 0, routerAuxLoss = 0;
  int64_t tokens = 0, counted = 0;
  std::array<double, dpo::kMetrics> dpo = {};
};

/// One run of the training loop: the program's entry points and inputs,
/// the schedule, where the figures go, and the steps taken so far.
class TrainingRun {
public:
  TrainingRun(Program &program, llvm::ArrayRef<Row> rows,
              llvm::StringRef source, llvm::raw_ostream &log,
              const TrainPosition &start)
      : program(program), job(program.job()), settings(job.train()), rows(rows),
        source(source), start(start), outputDir(job.checkpoint().output_dir()),
        report(program.writesFiles() ? log : llvm::nulls()) {}

  /// Finds the entry points and inputs, and checks the schedule against
  /// the position a resumed run starts from.
  llvm::Error prepare();
  /// metrics.jsonl (continued after a resume) and TensorBoard's events.
  llvm::Error openOutputs();
  /// Says what a step is, once.
  void announce();
  /// Every step of every epoch from the start, then the final save.
  llvm::Expected<TrainResult> run();

private:
  llvm::Expected<StepSums> runMicroBatches(llvm::ArrayRef<int64_t> order,
                                           int64_t index, int64_t inStep);
  /// The optimizer step on what `sums` summed, and its figures.
  llvm::Error update(const StepSums &sums, int64_t inStep,
                     std::chrono::steady_clock::time_point stepStart,
                     llvm::json::Object &line,
                     std::vector<std::pair<std::string, float>> &scalars);
  /// The step's line in metrics.jsonl and its TensorBoard scalars.
  llvm::Error record(llvm::json::Object line,
                     llvm::ArrayRef<std::pair<std::string, float>> scalars);
  /// A checkpoint after the step at `index` of `epoch`, where save_every
  /// asks for one.
  llvm::Error saveIfDue(int64_t epoch, int64_t index);

  Program &program;
  const JobConfig &job;
  const TrainConfig &settings;
  llvm::ArrayRef<Row> rows;
  llvm::StringRef source;
  const TrainPosition &start;
  std::string outputDir;
  llvm::raw_ostream &report; // rank 0's log: every rank computes the same

  const EntryPoint *step = nullptr, *optimizer = nullptr;
  int64_t batchSize = 0, seqLen = 0, accumulation = 0;
  Schedule schedule;
  int totalStepsBuffer = -1, divisorBuffer = -1, lossWeightBuffer = -1,
      microBatchBuffer = -1, scheduleStepBuffer = -1;
  int dpoMetrics = -1; // DPO: the step's metric sums (support/Dpo.h's order)
  int routerAuxLoss = -1; // the micro-batch's load-balancing loss, if any

  llvm::SmallString<256> metricsPath;
  std::unique_ptr<llvm::raw_fd_ostream> metricsFile;
  std::unique_ptr<io::EventFileWriter> tensorboard;
  std::chrono::steady_clock::time_point began;
  std::string lastCheckpoint; // the last one this run saved
  TrainResult result;
};

llvm::Error TrainingRun::prepare() {
  step = program.entryPoint(TRAIN_STEP);
  optimizer = program.entryPoint(OPTIMIZER_STEP);
  if (!step || !optimizer)
    return trainError("the executable has no train_step and optimizer_step: "
                      "compile it with twillc");
  batchSize = settings.batch_size();
  seqLen = rowLength(settings);
  accumulation = settings.gradient_accumulation_steps();
  schedule = scheduleOf(settings, rows.size());
  if (schedule.stepsPerEpoch == 0)
    return trainError(llvm::formatv("{0}: makes no rows of train.seq_len {1}",
                                    source, seqLen));
  // A resumed run continues the schedule it was on: the data must make at
  // least the steps it already took.
  if (start.steps > schedule.totalSteps || start.epoch > settings.epochs() ||
      start.index > schedule.stepsPerEpoch)
    return trainError(llvm::formatv(
        "the checkpoint is after step {0} (epoch {1}, step {2} of it), but "
        "{5} with train.epochs {6}, batch_size {7}, "
        "gradient_accumulation_steps {8} and max_steps_per_epoch {9} makes "
        "{3} steps in all ({4} per epoch): resume with the data and settings "
        "it was trained with",
        start.steps, start.epoch + 1, start.index, schedule.totalSteps,
        schedule.stepsPerEpoch, source, settings.epochs(), batchSize,
        accumulation, settings.max_steps_per_epoch()));
  totalStepsBuffer = program.inputOf(TOTAL_STEPS);
  divisorBuffer = program.inputOf(GRADIENT_DIVISOR);
  if (totalStepsBuffer < 0 || divisorBuffer < 0)
    return trainError("the executable has no total_steps or gradient_divisor "
                      "input: compile it again with this release's twillc");
  // DPO weights each micro-batch's loss by 1 / its pairs (TRL's mean).
  lossWeightBuffer = program.inputOf(LOSS_WEIGHT);
  *program.buffers().as<int64_t>(totalStepsBuffer) = schedule.totalSteps;
  // With LoRA dropout, the micro-batch's number in the run keys its masks:
  // the same on every mesh, and after resuming.
  microBatchBuffer = program.inputOf(MICRO_BATCH);
  scheduleStepBuffer = program.inputOf(SCHEDULE_STEP);
  if (scheduleStepBuffer < 0)
    return trainError("the executable has no schedule_step input: compile "
                      "it again with this release's twillc");
  dpoMetrics = Program::outputOf(*step, DPO_METRICS);
  routerAuxLoss = Program::outputOf(*step, ROUTER_AUX_LOSS);
  return llvm::Error::success();
}

llvm::Error TrainingRun::openOutputs() {
  metricsPath = outputDir;
  llvm::sys::path::append(metricsPath, "metrics.jsonl");
  if (!program.writesFiles())
    return llvm::Error::success();
  if (std::error_code error = llvm::sys::fs::create_directories(outputDir))
    return trainError("cannot create " + outputDir + ": " + error.message());
  if (start.steps)
    if (llvm::Error error = keepMetricsUpTo(metricsPath, start.steps))
      return error;
  std::error_code metricsError;
  // A resumed run continues the metrics of the steps before it.
  metricsFile = std::make_unique<llvm::raw_fd_ostream>(
      metricsPath, metricsError,
      start.steps ? llvm::sys::fs::OF_Append : llvm::sys::fs::OF_None);
  if (metricsError)
    return trainError("cannot write " + metricsPath + ": " +
                      metricsError.message());
  if (settings.tensorboard_dir().empty())
    return llvm::Error::success();
  auto writer = io::EventFileWriter::create(settings.tensorboard_dir());
  if (!writer)
    return writer.takeError();
  tensorboard = std::move(*writer);
  return llvm::Error::success();
}

void TrainingRun::announce() {
  // train.batch_size counts the rows of a micro-batch in all, which data
  // parallelism splits: a job's numbers do not depend on its mesh. Said
  // once, as users of per-device batch sizes expect the other.
  int64_t dp = job.parallel().dp();
  report << llvm::formatv(
      "training: {0} steps, each {1} micro-batch(es) of {2} rows x {3} "
      "tokens{5} (train.batch_size is the global micro-batch{4})\n",
      schedule.totalSteps, accumulation, batchSize, seqLen,
      dp > 1 ? llvm::formatv(", {0:f1} rows per data-parallel rank of {1}",
                             double(batchSize) / dp, dp)
                   .str()
             : std::string(),
      // As the Hugging Face Trainer, the rows left make a shorter step.
      schedule.stepsPerEpoch * accumulation > schedule.microBatchesPerEpoch
          ? llvm::formatv(", each epoch's last {0}: the rows left",
                          schedule.microBatchesPerEpoch % accumulation)
                .str()
          : std::string());
}

llvm::Expected<StepSums>
TrainingRun::runMicroBatches(llvm::ArrayRef<int64_t> order, int64_t index,
                             int64_t inStep) {
  StepSums sums;
  std::vector<std::vector<Row>> batches;
  int64_t labelled = 0;
  for (int64_t micro = 0; micro < inStep; ++micro) {
    batches.push_back(microBatch(rows, order, index * accumulation + micro,
                                 batchSize, seqLen));
    labelled += labelledTokens(batches.back());
  }
  // The routers' load-balancing loss is weighted by the step's tokens.
  setStepTokens(program, labelled);
  for (int64_t micro = 0; micro < inStep; ++micro) {
    const std::vector<Row> &batch = batches[micro];
    if (llvm::Error error = fillBatch(program, batch))
      return std::move(error);
    int64_t pairs = dpoMetrics >= 0 ? countedPairs(batch) : 0;
    if (lossWeightBuffer >= 0)
      *program.buffers().as<float>(lossWeightBuffer) =
          pairs ? float(1.0 / pairs) : 0.0f;
    if (microBatchBuffer >= 0)
      *program.buffers().as<int64_t>(microBatchBuffer) =
          result.steps * accumulation + micro;
    if (llvm::Error error = program.run(*step))
      return atStep(result.steps + 1, std::move(error));
    float microLoss = scalarOutput<float>(program, *step, LOSS_SUM);
    int64_t microTokens = scalarOutput<int64_t>(program, *step, TOKEN_COUNT);
    sums.tokens += microTokens;
    if (routerAuxLoss >= 0)
      sums.routerAuxLoss +=
          scalarOutput<float>(program, *step, ROUTER_AUX_LOSS);
    if (dpoMetrics < 0) {
      sums.loss += microLoss;
      continue;
    }
    if (microTokens != pairs)
      return atStep(result.steps + 1,
                    trainError(llvm::formatv(
                        "the train step counted {0} pairs where the host "
                        "counted {1}",
                        microTokens, pairs)));
    if (!pairs)
      continue;
    ++sums.counted;
    sums.loss += microLoss / pairs;
    std::array<double, dpo::kMetrics> metrics = {};
    addDpoMetrics(program, dpoMetrics, metrics.data());
    for (int m = 0; m < dpo::kMetrics; ++m)
      sums.dpo[m] += metrics[m] / pairs;
  }
  if (routerAuxLoss >= 0 && sums.tokens != labelled)
    return atStep(result.steps + 1,
                  trainError(llvm::formatv(
                      "the train step counted {0} labelled tokens where the "
                      "host counted {1}",
                      sums.tokens, labelled)));
  return sums;
}

llvm::Error
TrainingRun::update(const StepSums &sums, int64_t inStep,
                    std::chrono::steady_clock::time_point stepStart,
                    llvm::json::Object &line,
                    std::vector<std::pair<std::string, float>> &scalars) {
  *program.buffers().as<int64_t>(scheduleStepBuffer) = result.steps - 1;
  // The gradients summed what the loss did: the tokens' losses, or under
  // DPO the micro-batches' means.
  double divisor = dpoMetrics >= 0 ? double(sums.counted) : double(sums.tokens);
  *program.buffers().as<float>(divisorBuffer) = float(divisor);
  if (llvm::Error error = program.run(*optimizer))
    return atStep(result.steps, std::move(error));
  double tokensPerSecond =
      batchSize * inStep * seqLen / secondsSince(stepStart);
  result.lastLoss = sums.loss / divisor;
  float lr = scalarOutput<float>(program, *optimizer, LR);
  float gradNorm = scalarOutput<float>(program, *optimizer, GRAD_NORM);
  // The update is made: stop before anything is written from it.
  if (!std::isfinite(gradNorm))
    return diverged(result.steps, "the gradient norm", gradNorm,
                    lastCheckpoint);
  Backend::PeakMemory memory = program.peakMemory();
  result.peakMemory = memory;
  double elapsed = secondsSince(began);
  std::string dpoText;
  if (dpoMetrics >= 0)
    for (int m = 0; m < dpo::kMetrics; ++m) {
      float mean = float(sums.dpo[m] / divisor);
      line[dpo::kMetricNames[m]] = mean;
      scalars.push_back({std::string("train/") + dpo::kMetricNames[m], mean});
      if (m == 2 || m == 3)
        dpoText +=
            llvm::formatv(" | {0} {1:f3}", dpo::kMetricNames[m], mean).str();
    }
  int64_t totalSteps = schedule.totalSteps;
  if (result.steps % settings.log_every() == 0 ||
      result.steps == start.steps + 1 || result.steps == totalSteps)
    report << llvm::formatv(
        "step {0}/{1} | loss {2:f4}{9} | lr {3:e2} | grad norm {4:f4} | "
        "{5:f0} tokens/s | mem {6:f2} GiB | {7} elapsed, {8} left\n",
        result.steps, totalSteps, result.lastLoss, lr, gradNorm,
        tokensPerSecond, memory.bytes / double(1 << 30), duration(elapsed),
        duration(elapsed / (result.steps - start.steps) *
                 (totalSteps - result.steps)),
        dpoText);
  if (routerAuxLoss >= 0) { // the micro-batches' mean, as logged alone
    float aux = float(sums.routerAuxLoss / inStep);
    line["router_aux_loss"] = aux;
    scalars.push_back({"train/router_aux_loss", aux});
  }
  line["loss"] = result.lastLoss;
  line["lr"] = lr;
  line["grad_norm"] = gradNorm;
  line["tokens_per_second"] = tokensPerSecond;
  line["peak_memory_bytes"] = int64_t(memory.bytes);
  scalars.insert(
      scalars.end(),
      {{"train/loss", float(result.lastLoss)},
       {"train/lr", lr},
       {"train/grad_norm", gradNorm},
       {"train/tokens_per_second", float(tokensPerSecond)},
       {"train/peak_memory_gib", float(memory.bytes / double(1 << 30))}});
  return llvm::Error::success();
}

llvm::Error
TrainingRun::record(llvm::json::Object line,
                    llvm::ArrayRef<std::pair<std::string, float>> scalars) {
  line["elapsed_seconds"] = secondsSince(began);
  report.flush(); // each step's line out as it happens
  if (metricsFile) {
    *metricsFile << llvm::json::Value(std::move(line)) << "\n";
    metricsFile->flush();
    // A write that failed (a full disk) is an error naming the file, never
    // the stream's fatal error when it closes.
    if (metricsFile->has_error()) {
      std::error_code error = metricsFile->error();
      metricsFile->clear_error();
      return trainError("cannot write " + metricsPath + ": " + error.message());
    }
  }
  if (tensorboard)
    return tensorboard->scalars(result.steps, scalars);
  return llvm::Error::success();
}

llvm::Error TrainingRun::saveIfDue(int64_t epoch, int64_t index) {
  int64_t saveEvery = job.checkpoint().save_every();
  if (saveEvery <= 0 || result.steps % saveEvery != 0 ||
      result.steps == schedule.totalSteps)
    return llvm::Error::success();
  TrainPosition next{result.steps, epoch, index + 1};
  if (next.index == schedule.stepsPerEpoch)
    next = {result.steps, epoch + 1, 0};
  next.run = start.run;
  if (llvm::Error error = saveCheckpoint(program, outputDir, next))
    return error;
  lastCheckpoint = (outputDir + "/step_" + llvm::Twine(result.steps)).str();
  return llvm::Error::success();
}

llvm::Expected<TrainResult> TrainingRun::run() {
  began = std::chrono::steady_clock::now();
  result.steps = start.steps;
  for (int64_t epoch = start.epoch; epoch < settings.epochs(); ++epoch) {
    std::vector<int64_t> order =
        epochOrder(rows.size(), settings.seed(), epoch, job.data().shuffle());
    for (int64_t index = epoch == start.epoch ? start.index : 0;
         index < schedule.stepsPerEpoch; ++index) {
      auto stepStart = std::chrono::steady_clock::now();
      // The last step of an epoch takes the micro-batches left.
      int64_t inStep = std::min(accumulation, schedule.microBatchesPerEpoch -
                                                  index * accumulation);
      llvm::Expected<StepSums> sums = runMicroBatches(order, index, inStep);
      if (!sums)
        return sums.takeError();
      ++result.steps;
      // A non-finite loss stops the run before the update it would spread
      // (nothing of this step is applied, nothing non-finite is written).
      if (!std::isfinite(sums->loss))
        return diverged(result.steps, "the loss", sums->loss, lastCheckpoint);
      result.positions += batchSize * inStep * seqLen;
      result.labelled += sums->tokens;
      llvm::json::Object line{
          {"step", result.steps},
          {"epoch", epoch},
          {dpoMetrics >= 0 ? "pairs" : "tokens", sums->tokens}};
      // The same figures as TensorBoard scalars, under train/.
      std::vector<std::pair<std::string, float>> scalars = {
          {"train/labelled_tokens", float(sums->tokens)}};
      if (sums->tokens == 0) {
        // Nothing to learn from (the sums are zero): no update, but the
        // step is taken, and the lr schedule moves on past it.
        ++result.skipped;
        report << llvm::formatv("step {0}/{1} | no labelled tokens: no "
                                "update (the lr schedule moves on)\n",
                                result.steps, schedule.totalSteps);
        line["skipped"] = true;
      } else if (llvm::Error error =
                     update(*sums, inStep, stepStart, line, scalars)) {
        return std::move(error);
      }
      if (llvm::Error error = record(std::move(line), scalars))
        return std::move(error);
      if (llvm::Error error = saveIfDue(epoch, index))
        return std::move(error);
    }
  }
  result.seconds = secondsSince(began);
  result.peakMemory = program.peakMemory();
  if (!job.checkpoint().save_final())
    return result;
  if (llvm::Error error = saveTrainingResult(program, outputDir))
    return std::move(error);
  if (job.checkpoint().merged() && job.has_lora()) {
    llvm::SmallString<256> merged(outputDir);
    llvm::sys::path::append(merged, "merged");
    if (llvm::Error error = writeHfModel(program, merged, HfWeights::Merged))
      return std::move(error);
  }
  return result;
}

} // namespace

llvm::Expected<TrainResult>
twill::train(Program &program, llvm::ArrayRef<Row> rows, llvm::StringRef source,
             llvm::raw_ostream &log, const TrainPosition &start) {
  TrainingRun run(program, rows, source, log, start);
  if (llvm::Error error = run.prepare())
    return std::move(error);
  if (llvm::Error error = run.openOutputs())
    return std::move(error);
  run.announce();
  return run.run();
}

llvm::Expected<Evaluation> twill::evaluate(Program &program,
                                           llvm::ArrayRef<Row> rows) {
  const EntryPoint *forward = program.entryPoint(FORWARD);
  int logitsId = forward ? program.hostReadBuffer(*forward) : -1;
  if (logitsId < 0)
    return trainError("the executable has no forward pass with logits");
  const TrainConfig &settings = program.job().train();
  int64_t batchSize = settings.batch_size(), seqLen = rowLength(settings);
  int64_t vocab = program.job().model().vocab_size();
  Evaluation evaluation;
  int64_t correct = 0;
  double lossSum = 0;
  int dpoMetrics = Program::outputOf(*forward, DPO_METRICS);
  if (dpoMetrics >= 0)
    evaluation.dpoMetrics.assign(dpo::kMetrics, 0.0);
  for (int64_t index = 0; index * batchSize < (int64_t)rows.size(); ++index) {
    std::vector<Row> batch = microBatch(rows, {}, index, batchSize, seqLen);
    if (llvm::Error error = fillBatch(program, batch))
      return std::move(error);
    setStepTokens(program, labelledTokens(batch));
    if (llvm::Error error = program.run(*forward))
      return std::move(error);
    lossSum += scalarOutput<float>(program, *forward, LOSS_SUM);
    if (dpoMetrics >= 0) {
      evaluation.pairs += scalarOutput<int64_t>(program, *forward, TOKEN_COUNT);
      addDpoMetrics(program, dpoMetrics, evaluation.dpoMetrics.data());
    }
    llvm::Expected<std::vector<float>> values = program.wholeTensor(logitsId);
    if (!values)
      return values.takeError();
    const float *logits = values->data();
    for (auto [r, row] : llvm::enumerate(batch))
      for (int64_t i = 0; i < seqLen; ++i) {
        if (row.labels[i] < 0)
          continue;
        const float *z = logits + (r * seqLen + i) * vocab;
        correct += std::max_element(z, z + vocab) - z == row.labels[i];
        ++evaluation.tokens;
      }
  }
  if (evaluation.tokens) {
    evaluation.accuracy = double(correct) / evaluation.tokens;
    evaluation.loss = lossSum / evaluation.tokens;
  }
  if (evaluation.pairs) {
    evaluation.loss = lossSum / evaluation.pairs;
    for (double &metric : evaluation.dpoMetrics)
      metric /= evaluation.pairs;
  }
  return evaluation;
}
