//===- twill-train.cpp - run a compiled Twill job -------------------------===//
//
//   twill-train job.twx --eval --batch batch.json [--weights DIR]
//               [--adapter DIR] [--dump-logits logits.safetensors]
//
// Loads the Executable that twillc wrote, fills its parameters from a
// Hugging Face checkpoint (and a PEFT adapter), runs the forward pass on one
// batch on the CPU backend and prints the loss.
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

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "twill-train") << message << "\n";
  return 1;
}

static int fail(llvm::Error error) {
  return fail(llvm::toString(std::move(error)));
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
  const EntryPoint *forward = nullptr;
  for (const EntryPoint &entry : executable->entry_points())
    if (entry.name() == "forward")
      forward = &entry;
  if (!forward || forward->outputs_size() != 2)
    return fail(executablePath + ": has no forward entry point returning "
                                 "(loss, token count)");

  BufferSet buffers(*executable);
  std::string baseDir = weightsPath.empty()
                            ? executable->job().checkpoint().base_dir()
                            : weightsPath.getValue();
  if (llvm::Error error =
          loadParameters(*executable, buffers, baseDir, adapterPath))
    return fail(std::move(error));
  if (llvm::Error error = loadBatchJson(batchPath, *executable, buffers))
    return fail(std::move(error));
  if (llvm::Error error = CpuBackend::run(*forward, buffers))
    return fail(std::move(error));

  float lossSum = *buffers.as<float>(forward->outputs(0));
  int64_t tokens = *buffers.as<int64_t>(forward->outputs(1));
  llvm::outs() << llvm::formatv("loss {0:f6} (sum {1:f6} over {2} tokens)\n",
                                tokens ? lossSum / tokens : 0.0f, lossSum,
                                tokens);
  if (!dumpLogitsPath.empty())
    if (llvm::Error error = dumpLogits(*executable, buffers, dumpLogitsPath))
      return fail(std::move(error));
  return 0;
}
