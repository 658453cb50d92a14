//===- ModelFamily.cpp - the model families the frontend builds -----------===//

#include "frontend/config/ModelFamily.h"

#include "llvm/ADT/STLExtras.h"

using namespace twill;

namespace {
ModelFamily llama() {
  ModelFamily family{"llama", "LlamaForCausalLM"};
  family.readsAttentionBias = family.readsMlpBias = true;
  return family;
}
ModelFamily mistral() {
  ModelFamily family{"mistral", "MistralForCausalLM"};
  family.window = ModelFamily::Window::EveryLayer;
  return family;
}
ModelFamily qwen2() {
  ModelFamily family{"qwen2", "Qwen2ForCausalLM"};
  family.qkvBias = true;
  family.window = ModelFamily::Window::ChosenLayers;
  return family;
}
ModelFamily qwen3() {
  ModelFamily family{"qwen3", "Qwen3ForCausalLM"};
  family.readsAttentionBias = true;
  family.qkNorm = true;
  family.statesHeadDim = true;
  family.window = ModelFamily::Window::ChosenLayers;
  return family;
}
} // namespace

llvm::ArrayRef<ModelFamily> twill::modelFamilies() {
  static const ModelFamily families[] = {llama(), mistral(), qwen2(),
                                         qwen3()};
  return families;
}

const ModelFamily *twill::findModelFamily(llvm::StringRef modelType) {
  llvm::ArrayRef<ModelFamily> families = modelFamilies();
  const ModelFamily *family = llvm::find_if(
      families, [&](const ModelFamily &f) { return f.modelType == modelType; });
  return family == families.end() ? nullptr : family;
}

std::optional<int64_t> twill::slidingWindowOf(const ModelConfig &model,
                                              int64_t layer) {
  const ModelFamily *family = findModelFamily(model.model_type());
  if (!family || !model.has_sliding_window())
    return std::nullopt;
  switch (family->window) {
  case ModelFamily::Window::None:
    return std::nullopt;
  case ModelFamily::Window::EveryLayer:
    return model.sliding_window();
  case ModelFamily::Window::ChosenLayers: {
    // transformers' Qwen2Config: layer_types as given, else the layers from
    // max_window_layers on; none of them without use_sliding_window.
    if (!model.use_sliding_window())
      return std::nullopt;
    bool slides = model.layer_types().empty()
                      ? layer >= model.max_window_layers()
                      : layer < model.layer_types_size() &&
                            model.layer_types(layer) == "sliding_attention";
    return slides ? std::optional(model.sliding_window()) : std::nullopt;
  }
  }
  return std::nullopt;
}

bool twill::hasBias(const ModelConfig &model, llvm::StringRef projection) {
  const ModelFamily *family = findModelFamily(model.model_type());
  if (!family)
    return false;
  bool qkv = projection == "q_proj" || projection == "k_proj" ||
             projection == "v_proj";
  if (qkv && family->qkvBias)
    return true;
  if (qkv || projection == "o_proj")
    return family->readsAttentionBias && model.attention_bias();
  return family->readsMlpBias && model.mlp_bias();
}
