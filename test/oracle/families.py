"""The model families the oracles build tiny models of: transformers' own
classes, by config.json's model_type."""
import sys

import torch
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM,
                          Gemma3TextConfig, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          MixtralConfig, MixtralForCausalLM,
                          Phi3Config, Phi3ForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen2MoeConfig,
                          Qwen2MoeForCausalLM, Qwen3Config, Qwen3ForCausalLM,
                          Qwen3MoeConfig, Qwen3MoeForCausalLM)

# model_type -> the transformers classes of its config and causal LM
FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM),
            "mistral": (MistralConfig, MistralForCausalLM),
            "mixtral": (MixtralConfig, MixtralForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM),
            "qwen2_moe": (Qwen2MoeConfig, Qwen2MoeForCausalLM),
            "qwen3": (Qwen3Config, Qwen3ForCausalLM),
            "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM),
            "gemma2": (Gemma2Config, Gemma2ForCausalLM),
            "gemma3_text": (Gemma3TextConfig, Gemma3ForCausalLM),
            "phi3": (Phi3Config, Phi3ForCausalLM)}

# Each family's projections, as PEFT's target_modules name them: Phi-3's
# are fused (q, k and v in qkv_proj; gate and up in gate_up_proj).
PROJECTIONS = {"phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]}
UNFUSED = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
           "down_proj"]


def projections(family):
    return PROJECTIONS.get(family, UNFUSED)


# Mixtures of experts: PEFT adapts their experts as target_parameters.
EXPERTS = ["qwen2_moe", "qwen3_moe", "mixtral"]


def some_projections(family):
    """The modules the training oracles adapt: q, v and down, or the fused
    modules holding them and gate and up (Phi-3's); a mixture of experts'
    q, v, o and its router (`gate`), Qwen2-MoE's shared expert's gate."""
    if family in PROJECTIONS:
        return ["qkv_proj", "gate_up_proj", "down_proj"]
    if family == "qwen2_moe":  # its router by name (some_parameters)
        return ["q_proj", "v_proj", "o_proj", "shared_expert_gate"]
    if family in EXPERTS:
        return ["q_proj", "v_proj", "o_proj", "gate"]
    return ["q_proj", "v_proj", "down_proj"]


def some_parameters(family):
    """The parameters the training oracles adapt (PEFT's
    target_parameters): a mixture of experts' experts (and Qwen2-MoE's
    router: PEFT 0.21 fails on its `gate` module), else none."""
    if family == "qwen2_moe":
        return ["gate.weight", "mlp.experts.gate_up_proj",
                "mlp.experts.down_proj"]
    if family in EXPERTS:
        return ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]
    return None

# Gemma 3's RoPE: a base of its own on the sliding layers, and linear
# scaling on the full ones (as Gemma 3 12B and 27B have it).
GEMMA3_ROPE = {"sliding_attention": {"rope_type": "default",
                                     "rope_theta": 10000.0},
               "full_attention": {"rope_type": "linear", "factor": 4.0,
                                  "rope_theta": 1e6}}


def tiny_model(family, **settings):
    """A random fp32 model of `family`: 2 layers, hidden 32, 4 heads, MLP of
    48, as `settings` (vocab_size at least) do not say otherwise."""
    config_class, model_class = FAMILIES[family]
    config = config_class(**{**dict(hidden_size=32, intermediate_size=48,
                                    num_hidden_layers=2, num_attention_heads=4,
                                    max_position_embeddings=64), **settings})
    return model_class(config).float()


def randomize_norms_and_biases(model):
    """Norm weights in [0.5, 1.5) (Gemma's, which scale by 1 + w, in
    [-0.5, 0.5)) and biases in [-0.5, 0.5): transformers starts them at 1
    (Gemma's at 0) and 0, where a missed one would not show."""
    offset = 1.0 if model.config.model_type.startswith("gemma") else 0.0
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.uniform_(0.5 - offset, 1.5 - offset)
            elif name.endswith(".bias"):
                parameter.uniform_(-0.5, 0.5)


def load_balancing_loss(model, forwards):
    """transformers' load-balancing loss of several forwards of `model` (a
    transformers model, or PEFT's around one), each of a document alone
    (no padding): its family's load_balancing_loss_func of each sparse
    layer's router logits, the forwards' `router_logits` concatenated."""
    base = model.get_base_model() if hasattr(model, "get_base_model") \
        else model
    config = base.config
    experts = getattr(config, "num_experts", None) or config.num_local_experts
    loss_of = sys.modules[type(base).__module__].load_balancing_loss_func
    return loss_of(tuple(torch.cat(layer) for layer in zip(*forwards)),
                   experts, config.num_experts_per_tok)
