//===- Weights.cpp - filling parameters from checkpoints ------------------===//

#include "runtime/train/Weights.h"

#include "runtime/io/Safetensors.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

using namespace twill;

std::string twill::peftAdapterKey(llvm::StringRef name) {
  return "base_model.model." + name.str();
}

bool twill::isLoraWeight(llvm::StringRef name) {
  return name.ends_with(".lora_A.weight") || name.ends_with(".lora_B.weight");
}

static llvm::Error weightError(const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
}

/// Fails unless adapter_config.json in `adapterDir` describes the job's LoRA.
static llvm::Error checkAdapterConfig(llvm::StringRef adapterDir,
                                      const LoraConfig &lora) {
  llvm::SmallString<256> path(adapterDir);
  llvm::sys::path::append(path, "adapter_config.json");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return weightError(path + ": cannot read: " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> config =
      llvm::json::parse((*buffer)->getBuffer());
  if (!config)
    return weightError(
        path + ": not valid JSON: " + llvm::toString(config.takeError()));
  const llvm::json::Object *object = config->getAsObject();
  std::optional<int64_t> rank = object ? object->getInteger("r") : std::nullopt;
  std::optional<double> alpha =
      object ? object->getNumber("lora_alpha") : std::nullopt;
  if (!rank || !alpha)
    return weightError(path + ": needs r and lora_alpha");
  if (*rank != lora.rank() || std::abs(*alpha - lora.alpha()) > 1e-9)
    return weightError(
        llvm::formatv("{0}: the adapter has r={1}, lora_alpha={2}; the job has "
                      "lora.rank={3}, lora.alpha={4}",
                      path, *rank, *alpha, lora.rank(), lora.alpha()));
  return llvm::Error::success();
}

llvm::Error twill::loadParameters(const Executable &executable,
                                  BufferSet &buffers, llvm::StringRef baseDir,
                                  llvm::StringRef adapterDir) {
  if (baseDir.empty())
    return weightError("no base model: set checkpoint.base_dir in the job "
                       "or pass --weights");
  llvm::Expected<io::SafetensorsCheckpoint> base =
      io::SafetensorsCheckpoint::open(baseDir);
  if (!base)
    return base.takeError();

  std::unique_ptr<io::SafetensorsFile> adapter;
  if (!adapterDir.empty()) {
    if (llvm::Error error =
            checkAdapterConfig(adapterDir, executable.job().lora()))
      return error;
    llvm::SmallString<256> path(adapterDir);
    llvm::sys::path::append(path, "adapter_model.safetensors");
    llvm::Expected<std::unique_ptr<io::SafetensorsFile>> opened =
        io::SafetensorsFile::open(path);
    if (!opened)
      return opened.takeError();
    adapter = std::move(*opened);
  }

  for (const Parameter &parameter : executable.parameters()) {
    const Buffer &buffer = buffers.info(parameter.buffer());
    if (buffer.dtype() != F32)
      return weightError("parameter '" + parameter.name() +
                         "' is not fp32; the cpu backend runs fp32 programs");
    llvm::ArrayRef<int64_t> shape(buffer.shape().data(), buffer.shape_size());
    llvm::MutableArrayRef<float> values(buffers.as<float>(parameter.buffer()),
                                        numElements(buffer));
    llvm::Error error = llvm::Error::success();
    if (!isLoraWeight(parameter.name()))
      error = base->readF32(parameter.name(), shape, values);
    else if (adapter)
      error = adapter->readF32(peftAdapterKey(parameter.name()), shape, values);
    else
      std::memset(values.data(), 0, values.size() * sizeof(float));
    if (error)
      return error;
  }
  return llvm::Error::success();
}
