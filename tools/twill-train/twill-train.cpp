//===- twill-train.cpp - run a compiled Twill job -------------------------===//
//
//   twill-train job.twx --eval --batch batch.json [--weights DIR]
//               [--adapter DIR] [--dump-logits logits.safetensors]
//               [--gradients grads.safetensors]
//
// Loads the Executable that twillc wrote, fills its parameters from a
// Hugging Face checkpoint (and a PEFT adapter), runs the forward pass (or,
// with --gradients, the training step's loss and gradients) on one batch on
// the CPU backend and prints the loss.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackend.h"
#include "runtime/io/Safetensors.h"
#include "runtime/train/Batch.h"
#include "runtime/train/Weights.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using namespace twill;

static cl::opt<std::string> executablePath(cl::Positional, cl::Required,
                                           cl::desc("<job.twx>"));
static cl::opt<bool> eval("eval",
                          cl::desc("Run the forward pass on one batch and "
                                   "print its loss"));
static cl::opt<std::string>
    batchPath("batch",
              cl::desc("The batch: JSON with tokens, labels, "
                       "positions and segments"),
              cl::value_desc("batch.json"));
static cl::opt<std::string>
    weightsPath("weights",
                cl::desc("Hugging Face model folder or .safetensors file "
                         "(default: the job's checkpoint.base_dir)"),
                cl::value_desc("dir"));
static cl::opt<std::string> adapterPath("adapter",
                                        cl::desc("PEFT adapter folder to load"),
                                        cl::value_desc("dir"));
static cl::opt<std::string>
    dumpLogitsPath("dump-logits",
                   cl::desc("Write the logits as a safetensors file"),
                   cl::value_desc("logits.safetensors"));

static cl::opt<std::string> gradientsPath(
    "gradients",
    cl::desc("Run the training step instead and write the gradient of every "
             "trainable parameter of the summed loss"),
    cl::value_desc("grads.safetensors"));

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "twill-train") << message << "\n";
  return 1;
}

static int fail(llvm::Error error) {
  return fail(llvm::toString(std::move(error)));
}

/// Writes the outputs of `entry` named "<parameter>.grad" to `path`.
static llvm::Error writeGradients(const Executable &executable,
                                  const EntryPoint &entry, BufferSet &buffers,
                                  llvm::StringRef path) {
  std::vector<io::NamedTensor> gradients;
  for (int i = 0; i < entry.outputs_size(); ++i) {
    if (!llvm::StringRef(entry.output_names(i)).ends_with(".grad"))
      continue;
    const Buffer &buffer = executable.buffers(entry.outputs(i));
    gradients.push_back(
        {entry.output_names(i),
         std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
         llvm::ArrayRef<float>(buffers.as<float>(entry.outputs(i)),
                               numElements(buffer))});
  }
  return io::writeSafetensors(path, gradients);
}

/// Writes the buffer named "logits" to `path`.
static llvm::Error dumpLogits(const Executable &executable, BufferSet &buffers,
                              llvm::StringRef path) {
  for (int id = 0; id < executable.buffers_size(); ++id) {
    const Buffer &buffer = executable.buffers(id);
    if (buffer.name() != "logits")
      continue;
    io::NamedTensor logits{
        "logits",
        std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
        llvm::ArrayRef<float>(buffers.as<float>(id), numElements(buffer))};
    return io::writeSafetensors(path, {logits});
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "the executable has no value named logits");
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Twill job runner\n");
  if (!eval)
    return fail("training is not implemented yet; run a forward pass with "
                "--eval --batch batch.json");
  if (batchPath.empty())
    return fail("--eval needs --batch batch.json");

  llvm::Expected<Executable> executable = loadExecutable(executablePath);
  if (!executable)
    return fail(executable.takeError());
  llvm::StringRef entryName = gradientsPath.empty() ? "forward" : "train_step";
  const EntryPoint *entry = nullptr;
  for (const EntryPoint &candidate : executable->entry_points())
    if (candidate.name() == entryName)
      entry = &candidate;
  if (!entry || entry->outputs_size() < 2 ||
      entry->output_names_size() != entry->outputs_size())
    return fail(executablePath + ": has no " + entryName +
                " entry point returning the loss sum and token count");

  BufferSet buffers(*executable);
  std::string baseDir = weightsPath.empty()
                            ? executable->job().checkpoint().base_dir()
                            : weightsPath.getValue();
  if (llvm::Error error =
          loadParameters(*executable, buffers, baseDir, adapterPath))
    return fail(std::move(error));
  if (llvm::Error error = loadBatchJson(batchPath, *executable, buffers))
    return fail(std::move(error));
  if (llvm::Error error = CpuBackend::run(*entry, buffers))
    return fail(std::move(error));

  float lossSum = *buffers.as<float>(entry->outputs(0));
  int64_t tokens = *buffers.as<int64_t>(entry->outputs(1));
  llvm::outs() << llvm::formatv("loss {0:f6} (sum {1:f6} over {2} tokens)\n",
                                tokens ? lossSum / tokens : 0.0f, lossSum,
                                tokens);
  if (!gradientsPath.empty())
    if (llvm::Error error =
            writeGradients(*executable, *entry, buffers, gradientsPath))
      return fail(std::move(error));
  if (!dumpLogitsPath.empty())
    if (llvm::Error error = dumpLogits(*executable, buffers, dumpLogitsPath))
      return fail(std::move(error));
  return 0;
}
