//===- ModelFamily.cpp - the model families the frontend builds -----------===//

#include "frontend/config/ModelFamily.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

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
ModelFamily qwen3Moe() {
  ModelFamily family = qwen3();
  family.modelType = "qwen3_moe";
  family.causalLm = "Qwen3MoeForCausalLM";
  family.experts = {"mlp", "gate_proj", "up_proj", "down_proj",
                    /*ownIntermediateSize=*/true};
  return family;
}
ModelFamily qwen2Moe() {
  ModelFamily family = qwen2();
  family.modelType = "qwen2_moe";
  family.causalLm = "Qwen2MoeForCausalLM";
  family.qkvBias = false;
  family.readsQkvBias = true;
  family.window = ModelFamily::Window::AlternateChosenLayers;
  family.experts = {"mlp",
                    "gate_proj",
                    "up_proj",
                    "down_proj",
                    /*ownIntermediateSize=*/true,
                    /*alwaysNormalize=*/false,
                    /*sharedExpert=*/true};
  return family;
}
ModelFamily mixtral() {
  ModelFamily family = mistral();
  family.modelType = "mixtral";
  family.causalLm = "MixtralForCausalLM";
  family.experts = {"block_sparse_moe",
                    "w1",
                    "w3",
                    "w2",
                    /*ownIntermediateSize=*/false,
                    /*alwaysNormalize=*/true};
  return family;
}
ModelFamily phi3() {
  ModelFamily family{"phi3", "Phi3ForCausalLM"};
  family.fusedProjections = true;
  family.window = ModelFamily::Window::EveryLayer;
  return family;
}
/// Gemma's layer, sliding where layer_types says, one full layer in
/// `fullEvery` by default, as Gemma 2 and 3 share it.
ModelFamily gemma(llvm::StringLiteral modelType, llvm::StringLiteral causalLm,
                  int64_t fullEvery) {
  ModelFamily family{modelType, causalLm};
  family.readsAttentionBias = true;
  family.gemmaLayer = true;
  family.window = ModelFamily::Window::LayerTypes;
  family.queryPreAttnScalar = 256;
  family.fullEvery = fullEvery;
  return family;
}
ModelFamily gemma2() {
  // Gemma2Config's defaults: every other layer slides, and a config.json
  // without its soft-caps' keys caps at 50 and 30 (null: no cap).
  static constexpr std::pair<llvm::StringLiteral, double> caps[] = {
      {"attn_logit_softcapping", 50.0}, {"final_logit_softcapping", 30.0}};
  ModelFamily family = gemma("gemma2", "Gemma2ForCausalLM", 2);
  family.absentKeyDefaults = caps;
  return family;
}
ModelFamily gemma3Text() {
  // Gemma3TextConfig's defaults: five sliding layers to one full one, and
  // the sliding layers' own RoPE base.
  ModelFamily family = gemma("gemma3_text", "Gemma3ForCausalLM", 6);
  family.qkNorm = true;
  family.ropeLocalBaseFreq = 10000;
  return family;
}
} // namespace

llvm::ArrayRef<ModelFamily> twill::modelFamilies() {
  static const ModelFamily families[] = {
      llama(),    mistral(), qwen2(),  qwen3(),      qwen2Moe(),
      qwen3Moe(), mixtral(), gemma2(), gemma3Text(), phi3()};
  return families;
}

const ModelFamily *twill::findModelFamily(llvm::StringRef modelType) {
  llvm::ArrayRef<ModelFamily> families = modelFamilies();
  const ModelFamily *family = llvm::find_if(
      families, [&](const ModelFamily &f) { return f.modelType == modelType; });
  return family == families.end() ? nullptr : family;
}

bool twill::hasExperts(const ModelConfig &model, int64_t layer) {
  const ModelFamily *family = findModelFamily(model.model_type());
  return family && family->experts && model.num_experts() > 0 &&
         model.decoder_sparse_step() > 0 &&
         !llvm::is_contained(model.mlp_only_layers(), layer) &&
         (layer + 1) % model.decoder_sparse_step() == 0;
}

bool twill::targetsParameter(const LoraConfig &lora, llvm::StringRef key) {
  return llvm::any_of(lora.target_parameters(), [&](const std::string &target) {
    return key == target || (key.ends_with(target) &&
                             key.drop_back(target.size()).ends_with("."));
  });
}

/// Whether layer_types names `layer` a sliding layer.
static bool typedSliding(const ModelConfig &model, int64_t layer) {
  return layer < model.layer_types_size() &&
         model.layer_types(layer) == "sliding_attention";
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
  case ModelFamily::Window::LayerTypes:
    return typedSliding(model, layer) ? std::optional(model.sliding_window())
                                      : std::nullopt;
  case ModelFamily::Window::ChosenLayers:
  case ModelFamily::Window::AlternateChosenLayers: {
    // transformers' Qwen2Config: layer_types as given, else the layers from
    // max_window_layers on; Qwen2MoeConfig: else the first, third, ...
    // below it; none of them without use_sliding_window.
    if (!model.use_sliding_window())
      return std::nullopt;
    bool byDefault = family->window == ModelFamily::Window::ChosenLayers
                         ? layer >= model.max_window_layers()
                         : layer % 2 == 0 && layer < model.max_window_layers();
    bool slides =
        model.layer_types().empty() ? byDefault : typedSliding(model, layer);
    return slides ? std::optional(model.sliding_window()) : std::nullopt;
  }
  }
  return std::nullopt;
}

void twill::resolveFamilyDefaults(ModelConfig &model) {
  const ModelFamily *family = findModelFamily(model.model_type());
  if (!family)
    return;
  if (model.architectures().empty())
    model.add_architectures(family->causalLm.str());
  if (family->queryPreAttnScalar > 0 && !model.has_query_pre_attn_scalar())
    model.set_query_pre_attn_scalar(family->queryPreAttnScalar);
  if (family->ropeLocalBaseFreq > 0 && !model.has_rope_local_base_freq())
    model.set_rope_local_base_freq(family->ropeLocalBaseFreq);
  if (family->gemmaLayer && !model.has_hidden_activation())
    model.set_hidden_activation("gelu_pytorch_tanh");

  // transformers' pattern where the config names no layer types (up to the
  // most layers a job may have: more are refused).
  if (family->fullEvery > 0 && model.layer_types().empty())
    for (int64_t layer = 0;
         layer < std::min<int64_t>(model.num_hidden_layers(), 1 << 10); ++layer)
      model.add_layer_types((layer + 1) % family->fullEvery
                                ? "sliding_attention"
                                : "full_attention");
}

bool twill::hasBias(const ModelConfig &model, llvm::StringRef projection) {
  const ModelFamily *family = findModelFamily(model.model_type());
  if (!family)
    return false;
  bool qkv = projection == "q_proj" || projection == "k_proj" ||
             projection == "v_proj";
  if (qkv && (family->qkvBias || (family->readsQkvBias && model.qkv_bias())))
    return true;
  if (qkv || projection == "o_proj")
    return family->readsAttentionBias && model.attention_bias();
  return family->readsMlpBias && model.mlp_bias();
}
