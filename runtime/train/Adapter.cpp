//===- Adapter.cpp - writing PEFT adapters --------------------------------===//

#include "runtime/train/Adapter.h"

#include "runtime/io/AtomicFile.h"
#include "runtime/io/Safetensors.h"

#include "google/protobuf/message.h"
#include "runtime/train/Weights.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace twill;

static llvm::Error createDirectory(llvm::StringRef directory) {
  if (std::error_code error = llvm::sys::fs::create_directories(directory))
    return llvm::createStringError(error, "cannot create %s: %s",
                                   directory.str().c_str(),
                                   error.message().c_str());
  return llvm::Error::success();
}

/// Whole tensors, put together from every rank's blocks, ready to write.
struct WholeTensors {
  std::vector<std::vector<float>> values;
  std::vector<io::NamedTensor> tensors;
};

/// The LoRA weights (or all the others), named by `rename`. A collective:
/// every rank calls it.
static llvm::Expected<WholeTensors>
parameterTensors(Program &program, bool lora,
                 llvm::function_ref<std::string(llvm::StringRef)> rename) {
  WholeTensors whole;
  std::vector<const Parameter *> chosen;
  for (const Parameter &parameter : program.executable().parameters())
    if (isLoraWeight(parameter.name()) == lora)
      chosen.push_back(&parameter);
  whole.values.reserve(chosen.size());
  for (const Parameter *parameter : chosen) {
    llvm::Expected<BufferBlock> block = program.block(parameter->buffer());
    if (!block)
      return block.takeError();
    llvm::Expected<std::vector<float>> values =
        program.wholeTensor(parameter->buffer());
    if (!values)
      return values.takeError();
    whole.values.push_back(std::move(*values));
    whole.tensors.push_back({rename(parameter->name()), block->globalShape,
                             whole.values.back()});
  }
  return whole;
}

llvm::Error twill::writePeftAdapter(Program &program, llvm::StringRef directory,
                                    llvm::StringRef baseModel) {
  const JobConfig &job = program.job();
  llvm::Expected<WholeTensors> whole =
      parameterTensors(program, /*lora=*/true, peftAdapterKey);
  if (!whole)
    return whole.takeError();
  if (!program.writesFiles()) // written once, unsharded, by rank 0
    return llvm::Error::success();
  if (llvm::Error error = createDirectory(directory))
    return error;
  llvm::SmallString<256> weights(directory), config(directory);
  llvm::sys::path::append(weights, "adapter_model.safetensors");
  llvm::sys::path::append(config, "adapter_config.json");
  if (llvm::Error error =
          io::writeSafetensors(weights, whole->tensors, {{"format", "pt"}}))
    return error;

  const LoraConfig &lora = job.lora();
  llvm::json::Array targets;
  for (const std::string &target : lora.target_modules())
    targets.push_back(target);
  llvm::json::Object adapterConfig{{"peft_type", "LORA"},
                                   {"task_type", "CAUSAL_LM"},
                                   {"r", lora.rank()},
                                   {"lora_alpha", lora.alpha()},
                                   {"lora_dropout", lora.dropout()},
                                   {"target_modules", std::move(targets)},
                                   {"base_model_name_or_path", baseModel},
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
  return io::writeFileAtomically(config,
                                 [&](llvm::raw_ostream &os) { os << text; });
}

/// The set fields of `message` as JSON, numbers as numbers (protobuf's own
/// JSON mapping writes 64-bit integers as strings, which transformers
/// rejects).
static llvm::json::Object toJson(const google::protobuf::Message &message) {
  namespace pb = google::protobuf;
  llvm::json::Object object;
  const pb::Reflection &reflection = *message.GetReflection();
  std::vector<const pb::FieldDescriptor *> fields;
  reflection.ListFields(message, &fields);
  for (const pb::FieldDescriptor *field : fields) {
    if (field->is_repeated())
      continue; // ModelConfig has none
    llvm::json::Value value = nullptr;
    switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT64:
      value = reflection.GetInt64(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      value = reflection.GetDouble(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      value = reflection.GetBool(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      value = reflection.GetString(message, field);
      break;
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      value = toJson(reflection.GetMessage(message, field));
      break;
    default:
      continue;
    }
    object[field->name()] = std::move(value);
  }
  return object;
}

llvm::Error twill::writeHfModel(Program &program, llvm::StringRef directory) {
  llvm::Expected<WholeTensors> whole = parameterTensors(
      program, /*lora=*/false, [](llvm::StringRef name) { return name.str(); });
  if (!whole)
    return whole.takeError();
  if (!program.writesFiles())
    return llvm::Error::success();
  if (llvm::Error error = createDirectory(directory))
    return error;
  llvm::SmallString<256> weights(directory), config(directory);
  llvm::sys::path::append(weights, "model.safetensors");
  llvm::sys::path::append(config, "config.json");
  if (llvm::Error error =
          io::writeSafetensors(weights, whole->tensors, {{"format", "pt"}}))
    return error;

  // ModelConfig's fields are config.json's keys.
  llvm::json::Object object = toJson(program.job().model());
  object["architectures"] = llvm::json::Array{"LlamaForCausalLM"};
  object["torch_dtype"] = "float32";
  std::string text;
  llvm::raw_string_ostream(text)
      << llvm::formatv("{0:2}", llvm::json::Value(std::move(object)));
  return io::writeFileAtomically(config,
                                 [&](llvm::raw_ostream &os) { os << text; });
}

llvm::Error twill::saveTrainingResult(Program &program,
                                      llvm::StringRef directory) {
  const JobConfig &job = program.job();
  if (job.has_full_finetune())
    return writeHfModel(program, directory);
  if (!job.checkpoint().random_base())
    return writePeftAdapter(program, directory, job.checkpoint().base_dir());
  // The adapter is only as good as its base: keep the random one beside it.
  llvm::SmallString<256> base(directory);
  llvm::sys::path::append(base, "base");
  if (llvm::Error error = writeHfModel(program, base))
    return error;
  return writePeftAdapter(program, directory, base);
}
