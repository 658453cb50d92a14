//===- HfConfigImport.cpp - Hugging Face config.json -> ModelConfig -------===//
//
// ModelConfig's field names are config.json's keys, so after normalising the
// two ways transformers has written RoPE settings, protobuf's JSON mapping
// does the import.
//
//===----------------------------------------------------------------------===//

#include "frontend/config/JobConfig.h"
#include "frontend/config/ModelFamily.h"

#include "support/Json.h"

#include "google/protobuf/util/json_util.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;
namespace json = llvm::json;

static llvm::Error importError(llvm::StringRef path, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + what);
}

/// How errors name a JSON type.
static llvm::StringRef kindName(json::Value::Kind kind) {
  switch (kind) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return "a boolean";
  case json::Value::Number:
    return "a number";
  case json::Value::String:
    return "a string";
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  llvm_unreachable("every JSON kind is named");
}

/// One set of transformers 5 RoPE parameters, as errors show it.
static constexpr llvm::StringLiteral kRopeParameters =
    "{\"rope_type\": ..., \"rope_theta\": ..., ...}";

/// The rope_type of RoPE parameters: transformers reads "type" where
/// "rope_type" is absent.
static std::optional<llvm::StringRef> ropeType(const json::Object &parameters) {
  if (std::optional<llvm::StringRef> type = parameters.getString("rope_type"))
    return type;
  return parameters.getString("type");
}

/// Member `key` of `config` (`field` in errors): an object (of
/// `contents`), or none where absent or null, which transformers reads as
/// absent; of another type, an error naming it (read as absent, a Llama 3
/// config's RoPE would be trained as the default's).
static llvm::Expected<json::Object *>
optionalObject(json::Object &config, llvm::StringRef key,
               const llvm::Twine &field, const llvm::Twine &contents,
               llvm::StringRef path) {
  json::Value *value = config.get(key);
  if (!value || value->kind() == json::Value::Null)
    return nullptr;
  if (json::Object *object = value->getAsObject())
    return object;
  return importError(path, field + " must be an object (" + contents +
                               ") or null, got " + kindName(value->kind()));
}

/// Moves one set of transformers 5 RoPE parameters ({rope_theta,
/// rope_type, factor, ...}, named `field` in errors) into `config` as
/// `thetaKey` and, unless plain, `rope_scaling`. Its rope_theta and
/// partial_rotary_factor win over the config's own keys, as in
/// transformers 5 (convert_rope_params_to_dict sets them only where the
/// parameters have none), so the model trained is the one it runs.
static llvm::Error takeRope(json::Object &config, json::Object parameters,
                            llvm::StringRef thetaKey, const llvm::Twine &field,
                            llvm::StringRef path) {
  static constexpr std::pair<llvm::StringLiteral, json::Value::Kind> kinds[] = {
      {"rope_theta", json::Value::Number},
      {"partial_rotary_factor", json::Value::Number},
      {"rope_type", json::Value::String},
      {"type", json::Value::String}};
  for (auto [key, kind] : kinds)
    if (const json::Value *value = parameters.get(key);
        value && value->kind() != kind)
      return importError(path, field + "." + key + " must be " +
                                   kindName(kind) + ", got " +
                                   kindName(value->kind()));
  if (std::optional<double> theta = parameters.getNumber("rope_theta"))
    config[thetaKey] = *theta;
  parameters.erase("rope_theta");
  // Phi-3's, which transformers 5 keeps with the RoPE parameters.
  if (std::optional<double> share =
          parameters.getNumber("partial_rotary_factor"))
    config["partial_rotary_factor"] = *share;
  parameters.erase("partial_rotary_factor");
  std::optional<llvm::StringRef> type = ropeType(parameters);
  if (type && *type != "default")
    config["rope_scaling"] = std::move(parameters);
  return llvm::Error::success();
}

/// Rewrites transformers 5's `rope_parameters` ({rope_theta, rope_type,
/// factor, ...}, or one such per layer type: Gemma 3's) and transformers
/// 4's `rope_scaling.type` into the `rope_theta` + `rope_scaling.rope_type`
/// (+ `rope_local_base_freq`) form ModelConfig uses.
static llvm::Error normaliseRope(json::Object &config, llvm::StringRef path) {
  llvm::Expected<json::Object *> parameters =
      optionalObject(config, "rope_parameters", "rope_parameters",
                     kRopeParameters + ", or one such per layer type", path);
  if (!parameters)
    return parameters.takeError();
  if (*parameters) {
    // transformers 5 reads rope_scaling in place of rope_parameters
    // (Gemma 3's into its full layers'): which a config meant by both is
    // not its to say. No transformers writes both.
    if (const json::Value *scaling = config.get("rope_scaling");
        scaling && scaling->kind() != json::Value::Null)
      return importError(path, "both rope_scaling (transformers 4's key) and "
                               "rope_parameters (5's) are given, and "
                               "transformers 5 reads rope_scaling in place "
                               "of rope_parameters: keep the one meant");
    json::Object all = std::move(**parameters);
    config.erase("rope_parameters");
    llvm::Expected<json::Object *> full =
        optionalObject(all, "full_attention", "rope_parameters.full_attention",
                       kRopeParameters, path);
    if (!full)
      return full.takeError();
    llvm::Expected<json::Object *> sliding = optionalObject(
        all, "sliding_attention", "rope_parameters.sliding_attention",
        kRopeParameters, path);
    if (!sliding)
      return sliding.takeError();
    bool perLayerType =
        all.get("full_attention") || all.get("sliding_attention");
    if (!perLayerType)
      return takeRope(config, std::move(all), "rope_theta", "rope_parameters",
                      path);
    // The sliding layers' RoPE is plain, at a base of its own.
    if (*sliding) {
      std::optional<llvm::StringRef> type = ropeType(**sliding);
      if (type && *type != "default")
        return importError(path, "rope_parameters.sliding_attention's "
                                 "rope_type '" +
                                     *type +
                                     "' is not supported; allowed: default");
      if (llvm::Error error =
              takeRope(config, std::move(**sliding), "rope_local_base_freq",
                       "rope_parameters.sliding_attention", path))
        return error;
    }
    if (*full)
      if (llvm::Error error = takeRope(config, std::move(**full), "rope_theta",
                                       "rope_parameters.full_attention", path))
        return error;
  }
  if (json::Object *scaling = config.getObject("rope_scaling")) {
    if (!scaling->get("rope_type"))
      if (std::optional<llvm::StringRef> type = scaling->getString("type"))
        (*scaling)["rope_type"] = type->str();
    scaling->erase("type");
  }
  return llvm::Error::success();
}

/// Why a config.json without a model_type is refused, and what to add.
static std::string missingModelType(const json::Object &config) {
  llvm::SmallVector<llvm::StringRef> types;
  for (const ModelFamily &family : modelFamilies())
    types.push_back(family.modelType);
  std::string message =
      "no model_type, which transformers' AutoConfig needs to read a model "
      "(Twill builds no family by guess): add \"model_type\" (one of " +
      llvm::join(types, ", ") + ")";
  if (const json::Array *architectures = config.getArray("architectures"))
    for (const json::Value &name : *architectures)
      for (const ModelFamily &family : modelFamilies())
        if (name.getAsString() == family.causalLm)
          return message + "; its architectures name " + family.causalLm.str() +
                 ", whose model_type is \"" + family.modelType.str() + "\"";
  return message;
}

llvm::Expected<ModelConfig>
twill::importHfConfig(llvm::StringRef configJsonPath) {
  llvm::Expected<json::Value> parsed = readJsonFile(configJsonPath);
  if (!parsed)
    return parsed.takeError();
  json::Object *config = parsed->getAsObject();
  if (!config)
    return importError(configJsonPath, "expected a JSON object");
  if (llvm::Error error = normaliseRope(*config, configJsonPath))
    return std::move(error);
  // A quantized checkpoint is read only as bitsandbytes' 4-bit NF4 one,
  // dequantized on load (runtime/io/BitsAndBytes.h).
  if (const json::Object *quantization =
          config->getObject("quantization_config")) {
    llvm::StringRef method =
        quantization->getString("quant_method").value_or("");
    bool nf4 = method == "bitsandbytes" &&
               quantization->getBoolean("load_in_4bit").value_or(false) &&
               quantization->getString("bnb_4bit_quant_type") == "nf4";
    if (!nf4)
      return importError(
          configJsonPath,
          "quantization_config: of quantized checkpoints only bitsandbytes' "
          "4-bit NF4 ones (load_in_4bit, bnb_4bit_quant_type \"nf4\") are "
          "read; this one is quant_method '" +
              method + "'" +
              (method == "bitsandbytes" ? " without 4-bit NF4" : ""));
  }
  // transformers' AutoConfig reads the family from model_type alone and
  // refuses a config.json without one; ModelConfig's default would build
  // a Llama from another family's weights (a Qwen's biases left out).
  const json::Value *type = config->get("model_type");
  if (!type)
    return importError(configJsonPath, missingModelType(*config));
  if (!type->getAsString())
    return importError(configJsonPath,
                       "model_type must be a string (the model's family), "
                       "got " +
                           kindName(type->kind()));
  // A key its family's class defaults to a value where absent, and to none
  // where null (which the import reads as absent): the value, stated.
  if (const ModelFamily *family = findModelFamily(*type->getAsString()))
    for (const auto &[key, value] : family->absentKeyDefaults)
      config->try_emplace(key, value);

  // transformers 5 writes num_local_experts where the Hub's Qwen3-MoE
  // configs say num_experts.
  if (json::Value *experts = config->get("num_local_experts")) {
    config->try_emplace("num_experts", *experts);
    config->erase("num_local_experts");
  }

  std::string normalised;
  llvm::raw_string_ostream(normalised) << *parsed;
  ModelConfig model;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true; // architectures, torch_dtype, ...
  auto status =
      google::protobuf::util::JsonStringToMessage(normalised, &model, options);
  if (!status.ok())
    return importError(configJsonPath, status.message().as_string());
  return model;
}
