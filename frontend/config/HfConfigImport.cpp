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
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace twill;
namespace json = llvm::json;

static llvm::Error importError(llvm::StringRef path, const llvm::Twine &what) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 path + ": " + what);
}

/// Moves one set of transformers 5 RoPE parameters ({rope_theta,
/// rope_type, factor, ...}) into `config` as `thetaKey` and, unless plain,
/// `rope_scaling`.
static void takeRope(json::Object &config, json::Object parameters,
                     llvm::StringRef thetaKey) {
  if (std::optional<double> theta = parameters.getNumber("rope_theta"))
    config.try_emplace(thetaKey, *theta);
  parameters.erase("rope_theta");
  // Phi-3's, which transformers 5 keeps with the RoPE parameters.
  if (std::optional<double> share =
          parameters.getNumber("partial_rotary_factor"))
    config.try_emplace("partial_rotary_factor", *share);
  parameters.erase("partial_rotary_factor");
  std::optional<llvm::StringRef> type = parameters.getString("rope_type");
  if (type && *type != "default")
    config["rope_scaling"] = std::move(parameters);
}

/// Rewrites transformers 5's `rope_parameters` ({rope_theta, rope_type,
/// factor, ...}, or one such per layer type: Gemma 3's) and transformers
/// 4's `rope_scaling.type` into the `rope_theta` + `rope_scaling.rope_type`
/// (+ `rope_local_base_freq`) form ModelConfig uses.
static llvm::Error normaliseRope(json::Object &config, llvm::StringRef path) {
  if (json::Object *parameters = config.getObject("rope_parameters")) {
    json::Object all = std::move(*parameters);
    config.erase("rope_parameters");
    json::Object *full = all.getObject("full_attention");
    json::Object *sliding = all.getObject("sliding_attention");
    if (!full && !sliding) {
      takeRope(config, std::move(all), "rope_theta");
    } else {
      // The sliding layers' RoPE is plain, at a base of its own.
      if (sliding) {
        std::optional<llvm::StringRef> type = sliding->getString("rope_type");
        if (type && *type != "default")
          return importError(path, "rope_parameters.sliding_attention's "
                                   "rope_type '" +
                                       *type +
                                       "' is not supported; allowed: default");
        takeRope(config, std::move(*sliding), "rope_local_base_freq");
      }
      if (full)
        takeRope(config, std::move(*full), "rope_theta");
    }
  }
  if (json::Object *scaling = config.getObject("rope_scaling")) {
    if (!scaling->get("rope_type"))
      if (std::optional<llvm::StringRef> type = scaling->getString("type"))
        (*scaling)["rope_type"] = type->str();
    scaling->erase("type");
  }
  return llvm::Error::success();
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
  // A key its family's class defaults to a value where absent, and to none
  // where null (which the import reads as absent): the value, stated.
  std::optional<llvm::StringRef> type = config->getString("model_type");
  if (const ModelFamily *family =
          findModelFamily(type.value_or(ModelConfig().model_type())))
    for (const auto &[key, value] : family->absentKeyDefaults)
      config->try_emplace(key, value);

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
