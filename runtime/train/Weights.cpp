//===- Weights.cpp - filling parameters from checkpoints ------------------===//

#include "runtime/train/Weights.h"

#include "runtime/data/JsonLines.h"
#include "runtime/io/Safetensors.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

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
  llvm::Expected<llvm::json::Value> config = readJsonFile(path);
  if (!config)
    return config.takeError();
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

/// Fills `values` as an untrained parameter named `name` starts.
static void initialise(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                       llvm::MutableArrayRef<float> values,
                       std::mt19937_64 &random) {
  if (name.ends_with(".lora_B.weight")) {
    std::fill(values.begin(), values.end(), 0.0f);
  } else if (name.ends_with(".lora_A.weight")) {
    // kaiming_uniform_(a=sqrt(5)), PEFT's choice: bound 1 / sqrt(fan_in).
    float bound = 1.0f / std::sqrt(float(shape.back()));
    std::uniform_real_distribution<float> uniform(-bound, bound);
    for (float &value : values)
      value = uniform(random);
  } else if (name.ends_with("norm.weight")) {
    std::fill(values.begin(), values.end(), 1.0f);
  } else {
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float &value : values)
      value = normal(random);
  }
}

llvm::Expected<uint64_t> twill::loadParameters(Program &program,
                                               llvm::StringRef baseDir,
                                               llvm::StringRef adapterDir) {
  const JobConfig &job = program.job();
  bool randomBase = baseDir.empty() && job.checkpoint().random_base();
  if (baseDir.empty() && !randomBase)
    return weightError("no base model: set checkpoint.base_dir in the job "
                       "(or checkpoint.random_base), or pass --weights");
  std::optional<io::SafetensorsCheckpoint> base;
  if (!randomBase) {
    llvm::Expected<io::SafetensorsCheckpoint> opened =
        io::SafetensorsCheckpoint::open(baseDir);
    if (!opened)
      return opened.takeError();
    base = std::move(*opened);
  }

  std::unique_ptr<io::SafetensorsFile> adapter;
  if (!adapterDir.empty()) {
    if (llvm::Error error = checkAdapterConfig(adapterDir, job.lora()))
      return error;
    llvm::SmallString<256> path(adapterDir);
    llvm::sys::path::append(path, "adapter_model.safetensors");
    llvm::Expected<std::unique_ptr<io::SafetensorsFile>> opened =
        io::SafetensorsFile::open(path);
    if (!opened)
      return opened.takeError();
    adapter = std::move(*opened);
  }

  std::mt19937_64 random(job.train().seed());
  for (const Parameter &parameter : program.executable().parameters()) {
    const Buffer &buffer = program.buffers().info(parameter.buffer());
    if (buffer.dtype() != F32 && buffer.dtype() != BF16)
      return weightError("parameter '" + parameter.name() +
                         "' is neither fp32 nor bf16");
    llvm::Expected<BufferBlock> block = program.block(parameter.buffer());
    if (!block)
      return block.takeError();
    // Made in fp32, stored as the program keeps the parameter.
    std::vector<float> local(numElements(buffer));
    auto store = [&] {
      return program.buffers().setFloats(parameter.buffer(), local);
    };
    // Each rank reads only its block of the checkpoint's tensor.
    bool lora = isLoraWeight(parameter.name());
    std::vector<float> values(block->extentElements());
    llvm::Error error = llvm::Error::success();
    if (lora && adapter) {
      error = adapter->readBlockF32(peftAdapterKey(parameter.name()),
                                    block->globalShape, block->offset,
                                    block->extent, values);
    } else if (!lora && base) {
      error = base->readBlockF32(parameter.name(), block->globalShape,
                                 block->offset, block->extent, values);
    } else {
      // The same random stream on every rank: draw the whole tensor, keep
      // the block, so any mesh starts from the same weights.
      int64_t count = 1;
      for (int64_t size : block->globalShape)
        count *= size;
      std::vector<float> whole(count);
      initialise(parameter.name(), block->globalShape, whole, random);
      sliceBlock<float>(whole, *block, local);
      if (llvm::Error stored = store())
        return std::move(stored);
      continue;
    }
    if (error)
      return std::move(error);
    placeBlock(values, *block, local);
    if (llvm::Error stored = store())
      return std::move(stored);
  }
  return (base ? base->bytesRead() : 0) + (adapter ? adapter->bytesRead() : 0);
}
