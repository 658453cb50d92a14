//===- HfConfigImport.cpp - Hugging Face config.json -> ModelConfig -------===//
//
// ModelConfig's field names are config.json's keys, so after normalising the
// two ways transformers has written RoPE settings, protobuf's JSON mapping
// does the import.
//
//===----------------------------------------------------------------------===//

#include "frontend/config/JobConfig.h"

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

/// Rewrites transformers 5's `rope_parameters` ({rope_theta, rope_type,
/// factor, ...}) and transformers 4's `rope_scaling.type` into the
/// `rope_theta` + `rope_scaling.rope_type` form ModelConfig uses.
static void normaliseRope(json::Object &config) {
  if (json::Object *parameters = config.getObject("rope_parameters")) {
    json::Object scaling = std::move(*parameters);
    config.erase("rope_parameters");
    if (std::optional<double> theta = scaling.getNumber("rope_theta"))
      config.try_emplace("rope_theta", *theta);
    scaling.erase("rope_theta");
    std::optional<llvm::StringRef> type = scaling.getString("rope_type");
    if (type && *type != "default")
      config["rope_scaling"] = std::move(scaling);
  }
  if (json::Object *scaling = config.getObject("rope_scaling")) {
    if (!scaling->get("rope_type"))
      if (std::optional<llvm::StringRef> type = scaling->getString("type"))
        (*scaling)["rope_type"] = type->str();
    scaling->erase("type");
  }
}

llvm::Expected<ModelConfig>
twill::importHfConfig(llvm::StringRef configJsonPath) {
  llvm::Expected<json::Value> parsed = readJsonFile(configJsonPath);
  if (!parsed)
    return parsed.takeError();
  json::Object *config = parsed->getAsObject();
  if (!config)
    return importError(configJsonPath, "expected a JSON object");
  normaliseRope(*config);

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
