//===- ModelFamily.h - each family's additions to Llama ---------*- C++ -*-===//
//
// The one place that knows the model families (config.json's model_type).
// Each is Llama's decoder layer (RMSNorm, attention with rotary embeddings
// and grouped-query heads, SwiGLU MLP) with differences stated here as
// traits; the tracer (frontend/DecoderBuilder.cpp) builds from the traits
// and the config, and nothing after the frontend knows a family.
//
//===----------------------------------------------------------------------===//

#ifndef TWILL_FRONTEND_CONFIG_MODELFAMILY_H
#define TWILL_FRONTEND_CONFIG_MODELFAMILY_H

#include "proto/job_config.pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace twill {

struct ModelFamily {
  /// config.json's model_type, and the transformers class of its causal LM
  /// (config.json's architectures), which a merged model names.
  llvm::StringLiteral modelType, causalLm;
  /// q, k and v always have biases, whatever the config says (Qwen2).
  bool qkvBias = false;
  /// q, k and v have biases where config.json's qkv_bias says
  /// (Qwen2-MoE).
  bool readsQkvBias = false;
  /// Which of the config's bias keys the family's transformers class reads:
  /// attention_bias (q, k, v and o) and mlp_bias (gate, up and down).
  bool readsAttentionBias = false, readsMlpBias = false;
  /// RMSNorm over each head of q and of k before the rotary embedding
  /// (Qwen3's q_norm and k_norm, of head_dim weights).
  bool qkNorm = false;
  /// q, k and v are one module (qkv_proj), and gate and up one
  /// (gate_up_proj), whose weights stack their rows (Phi-3).
  bool fusedProjections = false;
  /// Sparse MLP layers: a router sending each token to some of the layer's
  /// experts, each a SwiGLU MLP (model.num_experts and the keys beside
  /// it). In memory (transformers 5, and a fused checkpoint) the layer's
  /// `mlp.gate.weight` and `mlp.experts.gate_up_proj` and `down_proj`; in
  /// the Hub's checkpoints the router and each expert's weights under
  /// `hubModule`, named as here.
  struct Experts {
    llvm::StringLiteral hubModule, gate, up, down;
    /// The experts' inner size is moe_intermediate_size (Qwen3-MoE), not
    /// intermediate_size (Mixtral).
    bool ownIntermediateSize = false;
    /// The k weights are always divided by their sum (Mixtral), not only
    /// with norm_topk_prob.
    bool alwaysNormalize = false;
    /// A shared expert every token goes through too (Qwen2-MoE's
    /// `mlp.shared_expert`, a SwiGLU MLP of
    /// shared_expert_intermediate_size), scaled by the sigmoid of its gate
    /// (`mlp.shared_expert_gate`, a linear layer to one value).
    bool sharedExpert = false;
  };
  std::optional<Experts> experts;
  /// head_dim must be stated: the transformers class's default is not
  /// hidden_size / num_attention_heads (Qwen3Config's is 128).
  bool statesHeadDim = false;
  /// How the config says which layers' attention slides.
  enum class Window {
    None,                  // never (Llama has no sliding_window)
    EveryLayer,            // sliding_window, null for none (Mistral)
    ChosenLayers,          // use_sliding_window and layer_types (Qwen2, Qwen3)
    AlternateChosenLayers, // the same, every other layer by default
                           // (Qwen2-MoE)
    LayerTypes,            // layer_types alone (Gemma 3)
  } window = Window::None;
  /// Gemma's layer: RMSNorm scaling by (1 + w), its weights starting at 0;
  /// the embeddings scaled by sqrt(hidden_size) in the weights' dtype; a
  /// norm after attention and after the MLP too, before each residual add;
  /// the MLP's gate through hidden_activation (GeGLU).
  bool gemmaLayer = false;
  /// The defaults of Gemma's keys, where the family has them (0: none):
  /// query_pre_attn_scalar, rope_local_base_freq (the sliding layers' RoPE
  /// base), and the sliding layers' pattern when layer_types is absent
  /// (every `fullEvery`-th layer attends to the whole sequence).
  double queryPreAttnScalar = 0, ropeLocalBaseFreq = 0;
  int64_t fullEvery = 0;
  /// config.json keys that are oneofs of their own (null: none) whose
  /// absence from a config.json means the transformers class's default, a
  /// number (Gemma 2's soft-caps).
  llvm::ArrayRef<std::pair<llvm::StringLiteral, double>> absentKeyDefaults;
};

/// Every family the frontend builds, in the order errors list them.
llvm::ArrayRef<ModelFamily> modelFamilies();
/// The family of `modelType`, or null.
const ModelFamily *findModelFamily(llvm::StringRef modelType);

/// The window of layer `layer`'s attention (the positions a query sees,
/// itself included) for `model` of a known family; none where every
/// earlier position is seen.
std::optional<int64_t> slidingWindowOf(const ModelConfig &model, int64_t layer);

/// Whether layer `layer`'s MLP is experts (a sparse layer) for `model` of
/// a known family.
bool hasExperts(const ModelConfig &model, int64_t layer);

/// The parameters of a sparse layer that LoRA adapts in place, where
/// lora.target_parameters names them (PEFT's ParamWrapper), under the
/// layer's path: the router's weight and the experts' (the latter in the
/// order their module defines them, the order PEFT nests their adapters
/// in).
inline constexpr llvm::StringLiteral kRouterWeight = "mlp.gate.weight";
inline constexpr llvm::StringLiteral kExpertParameters[] = {
    "mlp.experts.gate_up_proj", "mlp.experts.down_proj"};

/// Whether lora.target_parameters names the parameter `key` (its full
/// name), as PEFT matches them: the whole name, or its end after a dot.
bool targetsParameter(const LoraConfig &lora, llvm::StringRef key);

/// Whether a projection (q_proj ... down_proj) of `model` has a bias.
bool hasBias(const ModelConfig &model, llvm::StringRef projection);

/// Sets what `model`'s family defaults and the config leaves out: its
/// causal-LM class, Gemma's keys, Gemma 3's layer_types.
void resolveFamilyDefaults(ModelConfig &model);

} // namespace twill

#endif // TWILL_FRONTEND_CONFIG_MODELFAMILY_H
