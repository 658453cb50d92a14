//===- Adapter.cpp - writing PEFT adapters --------------------------------===//

#include "runtime/train/Adapter.h"

#include "runtime/io/Safetensors.h"
#include "runtime/train/Weights.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace twill;

static llvm::Error writeFileAtomically(llvm::StringRef path,
                                       llvm::StringRef contents) {
  llvm::Expected<llvm::sys::fs::TempFile> temp =
      llvm::sys::fs::TempFile::create(path + "-%%%%%%.tmp");
  if (!temp)
    return temp.takeError();
  llvm::raw_fd_ostream os(temp->FD, /*shouldClose=*/false);
  os << contents;
  os.flush();
  if (os.has_error()) {
    os.clear_error();
    llvm::consumeError(temp->discard());
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot write " + path);
  }
  return temp->keep(path);
}

llvm::Error twill::writePeftAdapter(Program &program,
                                    llvm::StringRef directory) {
  const JobConfig &job = program.job();
  if (std::error_code error = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(error, "cannot create %s: %s",
                                   directory.str().c_str(),
                                   error.message().c_str());
  std::vector<io::NamedTensor> tensors;
  for (const Parameter &parameter : program.executable().parameters()) {
    if (!isLoraWeight(parameter.name()))
      continue;
    const Buffer &buffer = program.executable().buffers(parameter.buffer());
    tensors.push_back(
        {peftAdapterKey(parameter.name()),
         std::vector<int64_t>(buffer.shape().begin(), buffer.shape().end()),
         llvm::ArrayRef<float>(program.buffers().as<float>(parameter.buffer()),
                               numElements(buffer))});
  }
  llvm::SmallString<256> weights(directory), config(directory);
  llvm::sys::path::append(weights, "adapter_model.safetensors");
  llvm::sys::path::append(config, "adapter_config.json");
  if (llvm::Error error =
          io::writeSafetensors(weights, tensors, {{"format", "pt"}}))
    return error;

  const LoraConfig &lora = job.lora();
  llvm::json::Array targets;
  for (const std::string &target : lora.target_modules())
    targets.push_back(target);
  llvm::json::Object adapterConfig{
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", lora.rank()},
      {"lora_alpha", lora.alpha()},
      {"lora_dropout", lora.dropout()},
      {"target_modules", std::move(targets)},
      {"base_model_name_or_path", job.checkpoint().base_dir()},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"use_rslora", false},
      {"use_dora", false},
      {"modules_to_save", nullptr},
      {"revision", nullptr}};
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(adapterConfig)));
  return writeFileAtomically(config, text);
}
