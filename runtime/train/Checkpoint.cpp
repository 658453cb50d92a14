//===- Checkpoint.cpp - resumable training state --------------------------===//

#include "runtime/train/Checkpoint.h"

#include "google/protobuf/text_format.h"
#include "runtime/data/JsonLines.h"
#include "runtime/io/Safetensors.h"
#include "runtime/train/Adapter.h"
#include "support/AtomicFile.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <cstdio> // renameat2
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <random>
#include <set>

using namespace twill;
namespace json = llvm::json;

static llvm::Error checkpointError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

static std::string joinPath(llvm::StringRef directory, llvm::StringRef name) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

/// "dp=2 x tp=2": a checkpoint resumes only on the mesh that wrote it.
static std::string meshText(const Executable &executable) {
  std::string text;
  if (executable.meshes_size())
    for (int axis = 0; axis < executable.meshes(0).axes_size(); ++axis)
      text += llvm::formatv("{0}{1}={2}", axis ? " x " : "",
                            executable.meshes(0).axes(axis),
                            executable.meshes(0).shape(axis));
  return text;
}

/// The buffers a checkpoint restores: trainable parameters and states, by
/// name.
static std::vector<std::pair<std::string, int>> savedBuffers(Program &program) {
  std::vector<std::pair<std::string, int>> buffers;
  for (const Parameter &parameter : program.executable().parameters())
    if (parameter.trainable())
      buffers.push_back({parameter.name(), parameter.buffer()});
  for (const State &state : program.executable().states())
    buffers.push_back({state.name(), state.buffer()});
  return buffers;
}

/// What defines the model whose state a checkpoint holds: every field of
/// the job's model and quantization sections and of its adaptation
/// (LoRA's rank, alpha, targets and variants, or full fine-tuning), as
/// "section.field" -> its
/// value in text format. State of one model is not another's; the rest of
/// the job (the learning rate, steps, logging, data) may change on resume.
static std::map<std::string, std::string>
modelDefinition(const JobConfig &job) {
  std::map<std::string, std::string> fields;
  auto add = [&](llvm::StringRef section,
                 const google::protobuf::Message &message) {
    const google::protobuf::Descriptor &type = *message.GetDescriptor();
    const google::protobuf::Reflection &reflection = *message.GetReflection();
    for (int i = 0; i < type.field_count(); ++i) {
      const google::protobuf::FieldDescriptor *field = type.field(i);
      std::string value;
      int count =
          field->is_repeated() ? reflection.FieldSize(message, field) : 1;
      for (int index = 0; index < count; ++index) {
        std::string one;
        google::protobuf::TextFormat::PrintFieldValueToString(
            message, field, field->is_repeated() ? index : -1, &one);
        value += (index ? ", " : "") + one;
      }
      fields[(section + "." + field->name()).str()] = value;
    }
  };
  add("model", job.model());
  add("quantization", job.quantization()); // the base the adapter trains on
  if (job.has_full_finetune())
    add("full_finetune", job.full_finetune());
  else
    add("lora", job.lora());
  return fields;
}

/// Fault injection for the crash tests (resume.test): ends the process at
/// once, as a kill would, at the moment TWILL_TEST_CRASH_DURING_SAVE names.
static bool crashTestAt(llvm::StringRef moment) {
  const char *asked = std::getenv("TWILL_TEST_CRASH_DURING_SAVE");
  return asked && moment == asked;
}
static void crashIfTestedAt(llvm::StringRef moment) {
  if (crashTestAt(moment))
    std::_Exit(86);
}

/// Where an existing step_N is moved while a new one takes its place, on a
/// filesystem that cannot swap them: still a complete checkpoint.
static constexpr llvm::StringLiteral kReplacedSuffix = ".replaced";

/// Renames the complete checkpoint `partial` to `final`. An existing
/// `final` (a run resumed from before it) is swapped with it in one step
/// (RENAME_EXCHANGE), so that a complete step_N exists at every moment, and
/// only then removed. Where the filesystem cannot swap (Lustre, NFS), it is
/// renamed to step_N.replaced first, which a resume takes for step_N while
/// there is none, and removed last.
static llvm::Error putInPlace(const std::string &partial,
                              const std::string &final) {
  auto failed = [&](const llvm::Twine &what) {
    return checkpointError("cannot rename " + partial + " to " + final + ": " +
                           what);
  };
  std::string replaced = final + kReplacedSuffix.str();
  if (!llvm::sys::fs::exists(final)) {
    if (std::error_code error = llvm::sys::fs::rename(partial, final))
      return failed(error.message());
    llvm::sys::fs::remove_directories(replaced, /*IgnoreErrors=*/true);
    return llvm::Error::success();
  }
  if (!crashTestAt("moved-away") &&
      renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, final.c_str(),
                RENAME_EXCHANGE) == 0) {
    crashIfTestedAt("swapped");
    // `partial` holds the old checkpoint now: never resumed from.
    llvm::sys::fs::remove_directories(partial, /*IgnoreErrors=*/true);
    return llvm::Error::success();
  }
  llvm::sys::fs::remove_directories(replaced, /*IgnoreErrors=*/true);
  if (std::error_code error = llvm::sys::fs::rename(final, replaced))
    return failed(error.message());
  crashIfTestedAt("moved-away");
  if (std::error_code error = llvm::sys::fs::rename(partial, final)) {
    (void)llvm::sys::fs::rename(replaced, final); // the old one back
    return failed(error.message());
  }
  llvm::sys::fs::remove_directories(replaced, /*IgnoreErrors=*/true);
  return llvm::Error::success();
}

llvm::Error twill::saveCheckpoint(Program &program, llvm::StringRef outputDir,
                                  const TrainPosition &position) {
  std::string name = llvm::formatv("step_{0}", position.steps);
  std::string final = joinPath(outputDir, name);
  std::string partial = final + ".partial";
  if (program.writesFiles()) {
    // Left by an earlier crash: never a checkpoint, safe to drop.
    llvm::sys::fs::remove_directories(partial, /*IgnoreErrors=*/true);
  }
  if (llvm::Error error = program.barrier())
    return error;
  if (llvm::Error error = saveTrainingResult(program, partial, final))
    return error;

  // This rank's blocks of the trainable parameters and the float states;
  // the integer states (the step counter) go to trainer.json.
  std::vector<std::pair<std::string, int>> buffers = savedBuffers(program);
  std::vector<int> ids;
  for (const auto &[bufferName, id] : buffers)
    ids.push_back(id);
  if (llvm::Error error = program.download(ids))
    return error;
  std::vector<io::NamedTensor> tensors;
  json::Object integers;
  for (const auto &[bufferName, id] : buffers) {
    const Buffer &buffer = program.executable().buffers(id);
    if (buffer.dtype() == I64) {
      if (numElements(buffer) != 1)
        return checkpointError("state '" + bufferName +
                               "' is an integer tensor, not a scalar");
      integers[bufferName] = *program.buffers().as<int64_t>(id);
      continue;
    }
    if (buffer.dtype() != F32)
      return checkpointError("state '" + bufferName + "' is not fp32");
    tensors.push_back(
        {bufferName,
         std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
         llvm::ArrayRef<float>(program.buffers().as<float>(id),
                               numElements(buffer))});
  }
  std::string stateDir = joinPath(partial, "state");
  if (std::error_code error = llvm::sys::fs::create_directories(stateDir))
    return checkpointError("cannot create " + stateDir + ": " +
                           error.message());
  std::string rankFile = joinPath(
      stateDir, llvm::formatv("rank-{0}.safetensors", program.rank()).str());
  if (llvm::Error error = io::writeSafetensors(
          rankFile, tensors, {{"mesh", meshText(program.executable())}}))
    return error;
  // This rank's state written, the checkpoint not yet in place.
  crashIfTestedAt("written");
  if (llvm::Error error = program.barrier())
    return error;

  if (program.writesFiles()) {
    json::Object definition;
    for (const auto &[field, value] : modelDefinition(program.job()))
      definition[field] = value;
    double now = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    json::Object trainer{{"steps", position.steps},
                         {"epoch", position.epoch},
                         {"index", position.index},
                         {"run", position.run},
                         {"saved_at", now},
                         {"ranks", program.worldSize()},
                         {"mesh", meshText(program.executable())},
                         {"model_definition", std::move(definition)},
                         {"integer_states", std::move(integers)}};
    std::string text;
    llvm::raw_string_ostream(text)
        << llvm::formatv("{0:2}", json::Value(std::move(trainer)));
    if (llvm::Error error =
            writeFileAtomically(joinPath(stateDir, "trainer.json"),
                                [&](llvm::raw_ostream &os) { os << text; }))
      return error;
    if (llvm::Error error = putInPlace(partial, final))
      return error;
  }
  return program.barrier();
}

std::string twill::newRunId() {
  std::random_device random;
  uint64_t id =
      (uint64_t(random()) << 32) ^ random() ^
      uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return llvm::utohexstr(id, /*LowerCase=*/true, /*Width=*/16);
}

namespace {
/// A complete checkpoint in an output folder, as its trainer.json says.
struct Found {
  std::string path;
  int64_t step = 0;
  bool replaced = false; // step_N.replaced, taken while there is no step_N
  std::string run;       // empty: written before runs were recorded
  double savedAt = 0;
};
} // namespace

static bool isCheckpoint(llvm::StringRef directory) {
  return llvm::sys::fs::exists(
      joinPath(joinPath(directory, "state"), "trainer.json"));
}

/// The complete checkpoints (step_N, step_N.replaced) in `folder`.
static std::vector<Found> checkpointsIn(llvm::StringRef folder) {
  std::vector<Found> found;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator entry(folder, error), end;
       entry != end && !error; entry.increment(error)) {
    llvm::StringRef name = llvm::sys::path::filename(entry->path());
    Found checkpoint{entry->path()};
    checkpoint.replaced = name.consume_back(kReplacedSuffix);
    if (!name.consume_front("step_") ||
        name.getAsInteger(10, checkpoint.step) || !isCheckpoint(entry->path()))
      continue;
    // What a trainer.json that cannot be read leaves unsaid is refused
    // when that checkpoint is loaded.
    llvm::Expected<json::Value> trainer = readJsonFile(
        joinPath(joinPath(entry->path(), "state"), "trainer.json"));
    if (trainer) {
      if (const json::Object *object = trainer->getAsObject()) {
        checkpoint.run = object->getString("run").value_or("").str();
        checkpoint.savedAt = object->getNumber("saved_at").value_or(0);
      }
    } else {
      llvm::consumeError(trainer.takeError());
    }
    found.push_back(std::move(checkpoint));
  }
  return found;
}

/// `path` itself when it is a checkpoint, else its latest complete step_N
/// (or step_N.replaced, where a crash left no step_N beside it) of the run
/// that saved last there, with the other runs' it passed by.
static llvm::Expected<TrainPosition> findCheckpoint(llvm::StringRef path) {
  if (isCheckpoint(path))
    return TrainPosition{0, 0, 0, path.str()};
  std::vector<Found> found = checkpointsIn(path);
  if (found.empty())
    return checkpointError(path + ": no checkpoint to resume from (a "
                                  "step_N folder with state/trainer.json)");
  const Found *last = &found.front();
  for (const Found &checkpoint : found)
    if (checkpoint.savedAt > last->savedAt)
      last = &checkpoint;
  const Found *best = nullptr;
  std::vector<std::string> passed;
  for (const Found &checkpoint : found) {
    if (checkpoint.run != last->run) {
      passed.push_back(llvm::sys::path::filename(checkpoint.path).str());
      continue;
    }
    if (!best || checkpoint.step > best->step ||
        (checkpoint.step == best->step && best->replaced &&
         !checkpoint.replaced))
      best = &checkpoint;
  }
  TrainPosition position{0, 0, 0, best->path};
  if (!passed.empty()) {
    llvm::sort(passed);
    position.passedBy = llvm::join(passed, ", ");
  }
  return position;
}

/// What an earlier run leaves in its output folder besides checkpoints.
static constexpr llvm::StringLiteral kRunResults[] = {
    "adapter_model.safetensors", "model.safetensors",
    "model.safetensors.index.json", "metrics.jsonl"};

llvm::Expected<std::string> twill::checkNoEarlierRun(llvm::StringRef outputDir,
                                                     bool overwrite) {
  std::vector<std::string> left;
  int64_t latest = -1;
  for (const Found &checkpoint : checkpointsIn(outputDir))
    latest = std::max(latest, checkpoint.step);
  if (latest >= 0)
    left.push_back(llvm::formatv("checkpoints (the latest: step_{0})", latest));
  // An empty metrics.jsonl is a run that ended before its first step.
  for (llvm::StringRef result : kRunResults) {
    uint64_t bytes = 0;
    if (!llvm::sys::fs::file_size(joinPath(outputDir, result), bytes) &&
        bytes > 0)
      left.push_back(result.str());
  }
  if (left.empty())
    return "";
  std::string found = llvm::join(left, ", ");
  if (overwrite)
    return outputDir.str() + " holds an earlier run's " + found +
           "; checkpoint.overwrite_output_dir: this run's replace them, and "
           "a --resume of the folder takes this run's checkpoints";
  return checkpointError(
      outputDir + " holds an earlier run's " + found +
      ", which a new run there would replace or leave beside its own" +
      (latest >= 0 ? " for a later --resume to take" : "") + ". Resume it" +
      (latest >= 0 ? " (--resume " + outputDir + ")" : "") +
      ", start into another checkpoint.output_dir, or start over there with "
      "checkpoint.overwrite_output_dir=true");
}

/// Fails unless the checkpoint in `directory`, whose trainer.json recorded
/// `saved`, holds state of the model `job` defines, naming each field that
/// differs.
static llvm::Error checkSameModel(const json::Object *saved,
                                  const JobConfig &job,
                                  llvm::StringRef directory) {
  if (!saved)
    return checkpointError(
        directory +
        ": records no model definition (written by an older twill-train): "
        "resume with the release that wrote it, or start a new run");
  std::vector<std::string> differences;
  std::map<std::string, std::string> current = modelDefinition(job);
  std::set<std::string> names;
  for (const auto &[field, value] : current)
    names.insert(field);
  for (const auto &[field, value] : *saved)
    names.insert(field.str());
  for (const std::string &field : names) {
    std::optional<llvm::StringRef> there = saved->getString(field);
    auto here = current.find(field);
    std::string was = there ? there->str() : "unset",
                is = here != current.end() ? here->second : "unset";
    if (was != is)
      differences.push_back(llvm::formatv("{0} is {1} there and {2} here",
                                          field, was.empty() ? "empty" : was,
                                          is.empty() ? "empty" : is));
  }
  if (differences.empty())
    return llvm::Error::success();
  return checkpointError(
      directory +
      " holds the state of another model: " + llvm::join(differences, "; ") +
      ". Resume with the job that wrote it (the learning rate, steps, "
      "logging and data may change), or start a new run in another "
      "checkpoint.output_dir");
}

llvm::Expected<TrainPosition> twill::loadCheckpoint(Program &program,
                                                    llvm::StringRef path) {
  llvm::Expected<TrainPosition> found = findCheckpoint(path);
  if (!found)
    return found.takeError();
  const std::string &directory = found->checkpoint;
  std::string stateDir = joinPath(directory, "state");
  std::string trainerPath = joinPath(stateDir, "trainer.json");
  llvm::Expected<json::Value> parsed = readJsonFile(trainerPath);
  if (!parsed)
    return parsed.takeError();
  const json::Object *trainer = parsed->getAsObject();
  std::optional<int64_t> steps =
      trainer ? trainer->getInteger("steps") : std::nullopt;
  std::optional<int64_t> epoch =
      trainer ? trainer->getInteger("epoch") : std::nullopt;
  std::optional<int64_t> index =
      trainer ? trainer->getInteger("index") : std::nullopt;
  std::optional<llvm::StringRef> mesh =
      trainer ? trainer->getString("mesh") : std::nullopt;
  const json::Object *integers =
      trainer ? trainer->getObject("integer_states") : nullptr;
  if (!steps || !epoch || !index || !mesh || !integers)
    return checkpointError(trainerPath + ": needs steps, epoch, index, mesh "
                                         "and integer_states");
  if (*steps < 0 || *epoch < 0 || *index < 0)
    return checkpointError(llvm::formatv("{0}: steps ({1}), epoch ({2}) and "
                                         "index ({3}) must not be negative",
                                         trainerPath, *steps, *epoch, *index)
                               .str());
  if (*mesh != meshText(program.executable()))
    return checkpointError(llvm::formatv("{0}: written on mesh {1}; this job "
                                         "runs on {2}: resume on the mesh "
                                         "that wrote it",
                                         directory, *mesh,
                                         meshText(program.executable()))
                               .str());

  if (llvm::Error error = checkSameModel(trainer->getObject("model_definition"),
                                         program.job(), directory))
    return std::move(error);

  std::string rankFile = joinPath(
      stateDir, llvm::formatv("rank-{0}.safetensors", program.rank()).str());
  llvm::Expected<std::unique_ptr<io::SafetensorsFile>> file =
      io::SafetensorsFile::open(rankFile);
  if (!file)
    return file.takeError();
  std::vector<std::pair<std::string, int>> saved = savedBuffers(program);
  // Every tensor of the file is state of this job: one written by a job
  // with other LoRA targets (or another model) is not resumed in part.
  llvm::StringSet<> expected;
  for (const auto &[name, id] : saved)
    expected.insert(name);
  for (const std::string &name : (*file)->names())
    if (!expected.contains(name))
      return checkpointError(
          rankFile + ": holds '" + name +
          "', which this job does not have: the checkpoint was written by a "
          "job with other LoRA targets or another model");
  std::vector<int> ids;
  for (const auto &[name, id] : saved) {
    const Buffer &buffer = program.executable().buffers(id);
    ids.push_back(id);
    if (buffer.dtype() == I64) {
      std::optional<int64_t> value = integers->getInteger(name);
      if (!value)
        return checkpointError(trainerPath + ": no integer state '" + name +
                               "'");
      // The integer states count the run's updates (Adam's bias
      // correction): -7 made the loss nan, blamed on the learning rate.
      if (*value < 0 || *value > *steps)
        return checkpointError(llvm::formatv(
            "{0}: integer state '{1}' is {2}: a count of the run's updates "
            "is from 0 to its steps ({3})",
            trainerPath, name, *value, *steps));
      *program.buffers().as<int64_t>(id) = *value;
      continue;
    }
    llvm::MutableArrayRef<float> values(program.buffers().as<float>(id),
                                        numElements(buffer));
    if (llvm::Error error = (*file)->readF32(
            name,
            std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
            values))
      return std::move(error);
  }
  if (llvm::Error error = program.upload(ids))
    return std::move(error);
  return TrainPosition{*steps,
                       *epoch,
                       *index,
                       directory,
                       trainer->getString("run").value_or("").str(),
                       found->passedBy};
}
