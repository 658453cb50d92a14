"""Oracle test of Twill's forward and backward passes against Hugging Face
transformers + PEFT + torch autograd, for each model family.

    python model_oracle.py CONFIG --bin BUILD/bin --work DIR

Builds a tiny random model of the config's family (transformers' own class:
Llama, Mistral, Mixtral, Qwen2, Qwen2-MoE, Qwen3, Qwen3-MoE, Gemma 2 and
3, Phi-3), with random norms and biases,
and, for LoRA configs, a PEFT adapter with non-zero B so the adapter matters, saves
them with `save_pretrained`, and has Twill compile the job (`twillc`) and run
it on those very files (`twill-train --eval`). Twill's logits must be within
1e-5 relative error (max abs difference / max abs value) of transformers',
its loss sum and token count must match the cross-entropy of those logits,
and its mean loss must be within 1e-5 of transformers' own loss. The
gradients of the summed loss with respect to every trainable parameter
(LoRA's A and B, DoRA's magnitudes, or every weight for full fine-tuning)
must be within 1e-5 relative error (||twill - torch|| / ||torch||) of torch
autograd's; in full fine-tuning a tensor's error is measured against at
least 1e-3 of the largest gradient's norm: Qwen3's key bias and key norm
get gradients 10^4 times smaller than the rest, where cancelling terms leave
fp32 rounding (torch's own fp32 misses them by 3e-5). The references run
in float64 on the fp32 files Twill reads:
what is measured is Twill's rounding alone. Packed rows are referenced by running
each document on its own, positions from 0, which is what attention within
documents must equal; padding after them is compared nowhere. Where the
config asks for the routers' load-balancing loss, the loss sum and the
gradients are of the cross-entropy plus it (times its coefficient and the
batch's labelled tokens: the batch is a step of its own), the loss itself
must be within 1e-5 of transformers' load_balancing_loss_func, and the mean
loss of transformers' own loss of the padded batch. The dropout config compares the gradients of a train
step that drops (PEFT's lora_dropout drawing test/oracle/dropout.py's
masks, Twill's for its first micro-batch). The DoRA configs move PEFT's
magnitudes off the norms it starts them at, so that they matter.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dropout
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from families import (GEMMA3_ROPE, load_balancing_loss, projections,
                      randomize_norms_and_biases, tiny_model)

ALL_PROJECTIONS = projections("llama")

# name -> (model settings, LoRA targets or None, document lengths per row)
CONFIGS = {
    "mha": (dict(num_key_value_heads=4), ["q_proj", "v_proj"], [[12], [12]]),
    "gqa": (dict(num_key_value_heads=2), ["q_proj", "v_proj"], [[12], [12]]),
    "tied": (dict(num_key_value_heads=2, tie_word_embeddings=True),
             ["q_proj", "v_proj"], [[12], [12]]),
    "rope_scaling": (dict(num_key_value_heads=2, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
        ["q_proj", "v_proj"], [[12], [12]]),
    "lora_all": (dict(num_key_value_heads=2), ALL_PROJECTIONS, [[12], [12]]),
    "lora_lm_head": (dict(num_key_value_heads=2), ["q_proj", "lm_head"],
                     [[12], [12]]),
    "packed": (dict(num_key_value_heads=2), ALL_PROJECTIONS,
               [[5, 4, 3], [7, 5]]),
    # Full fine-tuning (no LoRA): every weight is trainable.
    "full": (dict(num_key_value_heads=2), None, [[5, 4, 3], [12]]),
    "full_tied": (dict(num_key_value_heads=2, tie_word_embeddings=True), None,
                  [[12], [12]]),
}

# LoRA variants beyond the defaults, as PEFT's LoraConfig and the job's
# lora section spell them.
LORA_OPTIONS = {"rslora": ({"use_rslora": True}, " use_rslora: true"),
                "dropout": ({"lora_dropout": 0.25}, " dropout: 0.25"),
                "dora": ({"use_dora": True}, " use_dora: true"),
                "dora_dropout": ({"use_dora": True, "lora_dropout": 0.25},
                                 " use_dora: true dropout: 0.25")}


def target_parameters(names):
    """PEFT's and the job's options adapting parameters `names`."""
    return ({"target_parameters": names},
            "".join(f' target_parameters: "{name}"' for name in names))


CONFIGS["rslora"] = (dict(num_key_value_heads=2), ALL_PROJECTIONS,
                     [[12], [12]])
# Dropout (test/oracle/dropout.py's masks in PEFT's lora_dropout): only
# @train_step drops, so the logits are compared without it and the
# gradients with it; packed rows, so the masks follow each position's place
# in the batch, not in its document.
CONFIGS["dropout"] = (dict(num_key_value_heads=2),
                      ALL_PROJECTIONS + ["lm_head"], [[5, 4, 3], [7, 5]])
# DoRA (magnitudes moved off the norms PEFT starts them at, so that they
# matter), and DoRA with dropout: PEFT's W x + (m/n - 1) W d(x) +
# (m/n) s B A d(x).
CONFIGS["dora"] = (dict(num_key_value_heads=2), ALL_PROJECTIONS,
                   [[12], [12]])
CONFIGS["dora_dropout"] = (dict(num_key_value_heads=2), ALL_PROJECTIONS,
                           [[5, 4, 3], [7, 5]])

# The other families (settings' "family"; Llama's layer otherwise), with
# uneven shapes: a vocab of 101, 2 KV heads, packed documents.
PACKED = [[5, 4, 3], [7, 5]]
# Llama with every bias its config can ask for; DoRA leaves them out of
# what it scales.
CONFIGS["llama_bias"] = (dict(num_key_value_heads=2, attention_bias=True,
                              mlp_bias=True), ALL_PROJECTIONS, PACKED)
CONFIGS["llama_bias_dora"] = CONFIGS["llama_bias"]
# Mistral: head_dim other than hidden / heads (Mistral-Nemo's trait), and
# sliding-window attention: a window of 5, shorter than the rows of 12 and
# than their documents of 7 (each document alone is the reference, as
# attention within documents must be).
CONFIGS["mistral"] = (dict(family="mistral", num_key_value_heads=2,
                           head_dim=12, sliding_window=5), ALL_PROJECTIONS,
                      PACKED)
CONFIGS["mistral_full"] = (dict(family="mistral", num_key_value_heads=2,
                                sliding_window=3), None, [[12], [12]])
# Qwen2: biases on q, k and v, tied embeddings (the small sizes').
CONFIGS["qwen2"] = (dict(family="qwen2", num_key_value_heads=2,
                         tie_word_embeddings=True), ALL_PROJECTIONS, PACKED)
CONFIGS["qwen2_lm_head"] = (dict(family="qwen2", num_key_value_heads=2,
                                 tie_word_embeddings=True),
                            ["q_proj", "v_proj", "lm_head"], [[12], [12]])
CONFIGS["qwen2_dora_dropout"] = (dict(family="qwen2", num_key_value_heads=2),
                                 ALL_PROJECTIONS, PACKED)
CONFIGS["qwen2_full"] = (dict(family="qwen2", num_key_value_heads=2), None,
                         PACKED)
# Qwen2 with its window on the second layer only (layer_types).
CONFIGS["qwen2_window"] = (dict(family="qwen2", num_key_value_heads=2,
                                use_sliding_window=True, sliding_window=4,
                                max_window_layers=1), ALL_PROJECTIONS,
                           [[12], [9, 3]])
# Qwen3: RMSNorm of each query and key head, head_dim 12 with hidden 32
# and 4 heads; its optional attention biases.
CONFIGS["qwen3"] = (dict(family="qwen3", num_key_value_heads=2, head_dim=12),
                    ALL_PROJECTIONS, PACKED)
CONFIGS["qwen3_rslora"] = (dict(family="qwen3", num_key_value_heads=2,
                                head_dim=12, attention_bias=True),
                           ALL_PROJECTIONS + ["lm_head"], [[12], [12]])
CONFIGS["qwen3_full"] = (dict(family="qwen3", num_key_value_heads=1,
                              head_dim=12, attention_bias=True), None, PACKED)
# Qwen3-MoE: a sparse layer (4 experts of 16, 2 a token, their weights
# normalised) and a dense one (mlp_only_layers); the router's weights
# scaled up so that tokens choose different experts, well apart (a near tie
# would be chosen by rounding). LoRA adapts attention, the router (the
# module `gate`, which PEFT 0.21 adapts as the parameter gate.weight) and
# both of the experts' parameters (target_parameters: PEFT nests
# gate_up_proj's adapter under down_proj's); full fine-tuning trains the
# router and the experts too. The LoRA config's checkpoint holds the
# experts as save_pretrained writes them, the Hub's way (an expert's
# gate_proj, up_proj and down_proj each, over two shards); the full one's
# as transformers 5 keeps them, fused (gate_up_proj [4, 32, 32],
# down_proj [4, 32, 16]).
QWEN3_MOE = dict(family="qwen3_moe", num_key_value_heads=2, head_dim=12,
                 num_experts=4, num_experts_per_tok=2,
                 moe_intermediate_size=16, norm_topk_prob=True,
                 mlp_only_layers=[1], router_gain=40.0)
CONFIGS["qwen3_moe"] = (QWEN3_MOE, ["q_proj", "k_proj", "v_proj", "o_proj",
                                    "gate"], PACKED)
LORA_OPTIONS["qwen3_moe"] = target_parameters(["mlp.experts.gate_up_proj",
                                               "mlp.experts.down_proj"])
CONFIGS["qwen3_moe_full"] = (dict(QWEN3_MOE, fused_experts=True), None,
                             PACKED)
# The routers' load-balancing loss, which the checkpoint's config asks for
# (output_router_logits), its coefficient raised so that it weighs: a row
# of one document each and padding after it, which the loss leaves out
# (transformers' attention_mask), so that transformers' own loss of the
# padded batch is compared too. (A router gain of 20, as Qwen2-MoE's: at
# 40 the softmax saturates and its gradient, which this loss reaches
# whole, cancels to 4.6e-6.)
CONFIGS["qwen3_moe_aux"] = (
    dict(QWEN3_MOE, output_router_logits=True, router_aux_loss_coef=0.25,
         router_gain=20.0),
    CONFIGS["qwen3_moe"][1], [[9], [10]])
LORA_OPTIONS["qwen3_moe_aux"] = LORA_OPTIONS["qwen3_moe"]
# Qwen2-MoE: Qwen3-MoE's layers without q/k norms, q/k/v biases (qkv_bias),
# the weights not normalised, and a shared expert (an MLP of 24) beside the
# routed ones, behind the sigmoid of its gate (whose weights are scaled up
# so that the gate varies). LoRA, rank-stabilised, on attention, the
# shared expert's gate, the router and the experts (target_parameters; the
# router by its parameter's name: PEFT 0.21 fails on `gate` for this
# family, where 0.22 converts it as for the others).
# (The router's adapter, rank-stabilised, adds its own logits: a gain of 20
# rather than 40 keeps the softmax from the saturation where the router's
# gradients are ill-conditioned, 7.8e-6 off at 40.)
QWEN2_MOE = dict(family="qwen2_moe", num_key_value_heads=2, num_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16,
                 shared_expert_intermediate_size=24, mlp_only_layers=[1],
                 router_gain=20.0)
CONFIGS["qwen2_moe"] = (QWEN2_MOE, ["q_proj", "k_proj", "v_proj", "o_proj",
                                    "shared_expert_gate"], PACKED)
LORA_OPTIONS["qwen2_moe"] = (
    {"target_parameters": ["gate.weight", "mlp.experts.gate_up_proj",
                           "mlp.experts.down_proj"], "use_rslora": True},
    ' target_parameters: "gate.weight"'
    ' target_parameters: "mlp.experts.gate_up_proj"'
    ' target_parameters: "mlp.experts.down_proj" use_rslora: true')
CONFIGS["qwen2_moe_full"] = (dict(QWEN2_MOE, fused_experts=True), None,
                             PACKED)
# Routing's edge cases, on Qwen3-MoE's sparse layer with its router set so
# that every token's logits are `route_to` (a least-squares fit to the
# router's inputs: more hidden dims than tokens), LoRA on the experts alone
# (an adapter before the router would move its inputs off the fit): every
# token to expert 0 alone (the other three, tied, get none), and experts 0
# and 1 tied for every token (their router rows equal: the order within a
# token's two is either; experts 2 and 3 get none). (A tie for the k-th
# place is chosen by torch.topk's implementation, Twill's by the lower
# expert: not compared.)
EDGE = dict(QWEN3_MOE, norm_topk_prob=False, router_gain=1.0)
EXPERT_LORA = target_parameters(["mlp.experts.gate_up_proj",
                                 "mlp.experts.down_proj"])
CONFIGS["qwen3_moe_one_expert"] = (
    dict(EDGE, num_experts_per_tok=1, route_to=[3.0, 0.0, 0.0, 0.0]), [],
    PACKED)
CONFIGS["qwen3_moe_tied"] = (
    dict(EDGE, route_to=[1.0, 1.0, -1.0, -1.0]), [], PACKED)
LORA_OPTIONS["qwen3_moe_one_expert"] = EXPERT_LORA
LORA_OPTIONS["qwen3_moe_tied"] = EXPERT_LORA
# Mixtral: Mistral's layer (a window of 5) with every MLP 4 experts of
# intermediate_size, 2 a token, their weights always normalised; its Hub
# checkpoint keeps the router and the experts (w1, w3, w2) under
# block_sparse_moe; the full config's fused, under mlp. LoRA adapts
# attention and the experts' gate_up_proj alone (named by the end of its
# name).
MIXTRAL = dict(family="mixtral", num_key_value_heads=2, head_dim=12,
               sliding_window=5, num_local_experts=4, num_experts_per_tok=2,
               intermediate_size=16, router_gain=40.0)
CONFIGS["mixtral"] = (MIXTRAL, ["q_proj", "k_proj", "v_proj", "o_proj"],
                      PACKED)
LORA_OPTIONS["mixtral"] = target_parameters(["experts.gate_up_proj"])
CONFIGS["mixtral_full"] = (dict(MIXTRAL, fused_experts=True), None, PACKED)
# Gemma 3: (1 + w) norms, q/k norms, norms after attention and the MLP,
# GeGLU, embeddings scaled by sqrt(hidden), 1 / sqrt(query_pre_attn_scalar)
# (16, not head_dim 12), a sliding layer (window 5, RoPE base 1e4) and a
# full one (base 1e6, linear scaling), tied embeddings. (A scalar of 10 or
# 8 sharpens the attention until the key projection's gradients, through
# the key norm, are ill-conditioned: Twill's then err by 1.1e-5, torch's
# fp32 by 2.6e-6 against this float64 reference, whose RoPE angles are
# float32 as transformers computes them; against exact angles Twill's err
# by 8.8e-6.)
GEMMA3 = dict(family="gemma3_text", num_key_value_heads=2, head_dim=12,
              query_pre_attn_scalar=16, sliding_window=5,
              layer_types=["sliding_attention", "full_attention"],
              rope_parameters=GEMMA3_ROPE)
CONFIGS["gemma3"] = (GEMMA3, ALL_PROJECTIONS, PACKED)
CONFIGS["gemma3_lm_head"] = (GEMMA3, ["q_proj", "down_proj", "lm_head"],
                             [[12], [12]])
# Full fine-tuning; transformers' embedding skips its pad token's row in the
# backward (nn.Embedding's padding_idx), which Twill does not: no pad token.
CONFIGS["gemma3_full"] = (dict(GEMMA3, pad_token_id=None), None, PACKED)
# Gemma 2: Gemma's layer without q/k norms, every other layer sliding, and
# soft-capped attention scores and logits. The q and k weights are scaled
# up 3 times, and the caps are small enough that the tanh bends both:
# without the attention's cap the logits move by 5e-3 (relative), the
# logits (about 0.1) are capped at 0.2. (A cap bending the tiny model's
# scores of 1e-2 leaves the q and k gradients ill-conditioned, torch's own
# fp32 erring by 9e-6; scores 10 times larger make the attention so peaked
# that Twill's fp32 logits err by 9e-6.)
GEMMA2 = dict(family="gemma2", num_key_value_heads=2, head_dim=12,
              query_pre_attn_scalar=16, sliding_window=5, qk_gain=3.0,
              attn_logit_softcapping=1.0, final_logit_softcapping=0.2)
CONFIGS["gemma2"] = (GEMMA2, ALL_PROJECTIONS, PACKED)
CONFIGS["gemma2_full"] = (dict(GEMMA2, pad_token_id=None), None, PACKED)
# Phi-3: fused projections (qkv_proj, gate_up_proj), each adapted by PEFT as
# one module (one A, B of the fused rows), which Twill traces as blocks of
# rows; a window of 5. DoRA with dropout on the fused modules: their
# magnitudes are the fused rows'.
PHI3 = dict(family="phi3", num_key_value_heads=2, sliding_window=5,
            pad_token_id=None)
PHI3_PROJECTIONS = projections("phi3")
CONFIGS["phi3"] = (PHI3, PHI3_PROJECTIONS, PACKED)
CONFIGS["phi3_dora_dropout"] = (PHI3, PHI3_PROJECTIONS, PACKED)
CONFIGS["phi3_lm_head"] = (dict(PHI3, num_key_value_heads=4),
                           ["gate_up_proj", "lm_head"], [[12], [12]])
CONFIGS["phi3_full"] = (PHI3, None, PACKED)
# The fused qkv_proj adapted without gate_up_proj (with o_proj and
# down_proj, as a Phi-3 recipe adapts attention), one KV head (q, k and v
# blocks of 32, 8 and 8 rows) and hidden 32 with 8 heads of 4.
CONFIGS["phi3_qkv"] = (dict(PHI3, num_key_value_heads=1, num_attention_heads=8),
                       ["qkv_proj", "o_proj", "down_proj"], PACKED)
LORA_OPTIONS["phi3_dora_dropout"] = LORA_OPTIONS["dora_dropout"]
LORA_OPTIONS["llama_bias_dora"] = LORA_OPTIONS["dora"]
LORA_OPTIONS["qwen2_dora_dropout"] = LORA_OPTIONS["dora_dropout"]
LORA_OPTIONS["qwen3_rslora"] = LORA_OPTIONS["rslora"]

BATCH, SEQ, VOCAB = 2, 12, 101
RANK, ALPHA = 4, 8.0


def build_model(settings):
    torch.manual_seed(0)
    settings = dict(settings)
    if "rope_parameters" not in settings:
        settings["rope_theta"] = 10000.0
    qk_gain = settings.pop("qk_gain", 1.0)
    router_gain = settings.pop("router_gain", 1.0)
    settings.pop("fused_experts", None)
    settings.pop("route_to", None)
    model = tiny_model(settings.pop("family", "llama"), vocab_size=VOCAB,
                       rms_norm_eps=1e-5, **settings)
    randomize_norms_and_biases(model)
    if hasattr(model.config, "num_experts_per_tok"):
        # The experts' loop (torch's grouped_mm, the default, takes no
        # float64).
        model.config._experts_implementation = "eager"
    with torch.no_grad():  # scores of about 1 rather than 1e-2
        for name, parameter in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                parameter.mul_(qk_gain)
            if name.endswith("mlp.gate.weight"):
                parameter.normal_().mul_(router_gain / parameter.shape[1])
            if name.endswith("shared_expert_gate.weight"):
                parameter.normal_().mul_(4.0 / parameter.shape[1] ** 0.5)
    return model.eval()


def fit_router(model, documents, logits):
    """Sets the first layer's router so that each token of the batch has
    router logits `logits`; experts 0 and 1 given the same logit get the
    same weights (an exact tie)."""
    router = model.model.layers[0].mlp.gate
    inputs = []
    hook = router.register_forward_hook(
        lambda module, args, output: inputs.append(
            args[0].reshape(-1, args[0].shape[-1])))
    with torch.no_grad():
        reference_logits(model, make_batch(documents)[0], documents)
    hook.remove()
    x = torch.cat(inputs).double()
    target = torch.tensor(logits, dtype=torch.float64).expand(len(x), -1)
    with torch.no_grad():
        router.weight.copy_(torch.linalg.lstsq(x, target).solution.T)
        if logits[0] == logits[1]:
            router.weight[1] = router.weight[0]


def make_batch(documents):
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    labels = torch.full((BATCH, SEQ), -100)
    positions = torch.zeros((BATCH, SEQ), dtype=torch.long)
    segments = torch.zeros((BATCH, SEQ), dtype=torch.long)
    for row, lengths in enumerate(documents):
        start = 0
        for segment, length in enumerate(lengths):
            end = start + length
            positions[row, start:end] = torch.arange(length)
            segments[row, start:end] = segment
            # Each token predicts the next one of its document.
            labels[row, start:end - 1] = tokens[row, start + 1:end]
            start = end
    labels[0, 2] = -100  # an ignored position inside a document
    return tokens, labels, positions, segments


def attention_mask(documents):
    """1 at the documents' tokens, 0 at the padding after them."""
    mask = torch.zeros((BATCH, SEQ), dtype=torch.long)
    for row, lengths in enumerate(documents):
        mask[row, :sum(lengths)] = 1
    return mask


def reference_logits(model, tokens, documents, masks=None):
    """The logits of each document alone; with `masks`, LoRA dropout as
    Twill's first micro-batch draws it."""
    rows = []
    for row, lengths in enumerate(documents):
        start, pieces = 0, []
        for length in lengths:
            ids = tokens[row, start:start + length].unsqueeze(0)
            if masks:
                masks.at(0, range(row * SEQ + start, row * SEQ + start + length))
                model.train()  # PEFT's DoRA drops only in training mode
            pieces.append(model(input_ids=ids).logits[0])
            model.eval()
            start += length
        rows.append(torch.cat(pieces))
    # Padding after the documents: zeros, which no comparison reads.
    return torch.stack([torch.cat([row, row.new_zeros(SEQ - len(row),
                                                      row.shape[1])])
                        for row in rows])


def reference_aux_loss(model, tokens, documents):
    """transformers' load-balancing loss of the batch's documents, each
    alone (no padding)."""
    forwards = []
    for row, lengths in enumerate(documents):
        start = 0
        for length in lengths:
            ids = tokens[row, start:start + length].unsqueeze(0)
            forwards.append(
                model(input_ids=ids, output_router_logits=True).router_logits)
            start += length
    return load_balancing_loss(model, forwards)


def relative_error(actual, expected):
    """Max abs difference / max abs value."""
    actual = actual.to(expected.dtype)
    scale = expected.abs().max().item()
    return (actual - expected).abs().max().item() / (scale or 1.0)


def norm_error(actual, expected, floor=0.0):
    """||actual - expected|| / max(||expected||, floor)."""
    actual = actual.to(expected.dtype)
    scale = max(expected.norm().item(), floor, 1e-30)
    return (actual - expected).norm().item() / scale


def reference_gradients(model, trainable, logits, labels, extra=0.0):
    """d(summed loss + `extra`)/d(parameter) for Twill's parameter
    names."""
    counted = labels != -100
    loss = torch.nn.functional.cross_entropy(
        logits[counted], labels[counted], reduction="sum") + extra
    model.zero_grad()
    loss.backward()
    return {twill: parameter.grad for twill, parameter in trainable.items()}


def gradients_by_parameter(expected, names):
    """`expected` (by tensor) for each of Twill's gradient `names`
    ("<tensor>.grad": a fused projection's whole, as its adapter holds
    it)."""
    return {name.removesuffix(".grad"): expected[name.removesuffix(".grad")]
            for name in names if name.removesuffix(".grad") in expected}


def trainable_parameters(model, lora):
    """Twill's parameter name -> the torch parameter it stands for."""
    result = {}
    for name, parameter in model.named_parameters():
        if lora:
            if "lora_" not in name:
                continue
            # base_model.model.X.lora_A.default.weight -> X.lora_A.weight,
            # X.lora_magnitude_vector.default.weight -> X.lora_magnitude_vector
            name = name.removeprefix("base_model.model.").replace(
                "lora_magnitude_vector.default.weight",
                "lora_magnitude_vector").replace(".default.", ".")
        result[name] = parameter
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config", choices=sorted(CONFIGS))
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    settings, targets, documents = CONFIGS[args.config]
    peft_options, job_options = LORA_OPTIONS.get(args.config, ({}, ""))
    work = args.work / args.config
    work.mkdir(parents=True, exist_ok=True)

    model = build_model(settings)
    if "route_to" in settings:
        fit_router(model, documents, settings["route_to"])
    # Two shards, to exercise model.safetensors.index.json (in a folder of
    # its own: no earlier run's files beside them).
    shutil.rmtree(work / "model", ignore_errors=True)
    model.save_pretrained(work / "model", max_shard_size="40KB")
    if settings.get("fused_experts"):
        # As transformers 5 holds the experts: one tensor each of gate_up
        # and down (save_pretrained writes the Hub's per-expert ones).
        for old in (work / "model").glob("model*.safetensors*"):
            old.unlink()
        save_file({name: tensor.contiguous()
                   for name, tensor in model.state_dict().items()},
                  str(work / "model" / "model.safetensors"))
    lora = targets is not None
    masks = None
    if lora:
        options = {"lora_dropout": 0.0, **peft_options}
        model = get_peft_model(model, LoraConfig(
            r=RANK, lora_alpha=ALPHA, target_modules=targets, **options,
            init_lora_weights=False))  # random A and B: the adapter matters
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if "lora_magnitude_vector" in name:
                    parameter.mul_(torch.empty_like(parameter).uniform_(0.8,
                                                                        1.2))
        model.save_pretrained(work / "adapter")
        if options["lora_dropout"]:
            masks = dropout.install(model, 0, options["lora_dropout"])
    model.eval()

    # The references in float64: the exact result of the fp32 files Twill
    # reads, so that what is measured is Twill's rounding, not also torch's.
    model = model.double()
    tokens, labels, positions, segments = make_batch(documents)
    logits_with_grad = reference_logits(model, tokens, documents)
    expected = logits_with_grad.detach()
    counted = labels != -100
    mask = attention_mask(documents)
    expected_sum = torch.nn.functional.cross_entropy(
        expected.double()[counted], labels[counted], reduction="sum").item()
    # With the load-balancing loss, the batch is a step of its own: its
    # summed loss adds coef x the loss for each of its labelled tokens.
    aux, weighted_aux = None, 0.0
    if settings.get("output_router_logits"):
        aux = reference_aux_loss(model, tokens, documents)
        weighted_aux = (settings["router_aux_loss_coef"] * int(counted.sum())
                        * aux)
        expected_sum += weighted_aux.item()
    hf_mean = None
    if all(len(lengths) == 1 for lengths in documents):
        # transformers' own loss: it shifts its labels, Twill's are shifted.
        hf_labels = torch.full_like(labels, -100)
        hf_labels[:, 1:] = labels[:, :-1]
        with torch.no_grad():
            hf_mean = model(input_ids=tokens, labels=hf_labels,
                            attention_mask=mask).loss.item()
    trainable = trainable_parameters(model, lora)
    if masks:
        logits_with_grad = reference_logits(model, tokens, documents, masks)
        masks.enabled = False
    expected_grads = reference_gradients(model, trainable, logits_with_grad,
                                         labels, weighted_aux)

    batch = {"tokens": tokens.tolist(), "labels": labels.tolist(),
             "positions": positions.tolist(), "segments": segments.tolist(),
             "attention_mask": mask.tolist()}
    (work / "batch.json").write_text(json.dumps(batch))
    if lora:
        modules = "".join(f' target_modules: "{t}"' for t in targets)
        adaptation = (f"lora {{ rank: {RANK} alpha: {ALPHA}{modules}"
                      f"{job_options} }}")
    else:
        adaptation = "full_finetune {}"
    (work / "job.textproto").write_text(
        f'checkpoint {{ base_dir: "{work / "model"}" }}\n{adaptation}\n'
        f"train {{ batch_size: {BATCH} seq_len: {SEQ} }}\n")

    subprocess.run([args.bin / "twillc", work / "job.textproto",
                    "-o", work / "job.twx"], check=True)
    adapter = ["--adapter", work / "adapter"] if lora else []
    run = subprocess.run(
        [args.bin / "twill-train", work / "job.twx", "--eval",
         "--batch", work / "batch.json", *adapter,
         "--dump-logits", work / "logits.safetensors"],
        check=True, capture_output=True, text=True)
    print(run.stdout, end="")
    match = re.search(r"sum (\S+) over (\d+) tokens", run.stdout)
    twill_sum, twill_count = float(match.group(1)), int(match.group(2))
    logits = load_file(str(work / "logits.safetensors"))["logits"]

    kept = mask.bool()
    error = relative_error(logits[kept], expected[kept])
    loss_error = abs(twill_sum - expected_sum) / abs(expected_sum)
    print(f"{args.config}: logits relative error {error:.2e}, loss sum "
          f"{twill_sum:.6f} vs {expected_sum:.6f} (relative {loss_error:.2e}),"
          f" tokens {twill_count} vs {int(counted.sum())}")
    ok = (error < 1e-5 and loss_error < 1e-5
          and twill_count == int(counted.sum()))
    if aux is not None:
        twill_aux = float(re.search(r"router_aux_loss (\S+)",
                                    run.stdout).group(1))
        aux_error = abs(twill_aux - aux.item()) / abs(aux.item())
        print(f"{args.config}: load-balancing loss {twill_aux:.6f}, "
              f"transformers {aux.item():.6f} (relative {aux_error:.2e})")
        ok = ok and aux_error < 1e-5
    if hf_mean is not None:
        twill_mean = twill_sum / twill_count
        mean_error = abs(twill_mean - hf_mean) / abs(hf_mean)
        print(f"{args.config}: mean loss {twill_mean:.6f}, transformers "
              f"{hf_mean:.6f} (relative {mean_error:.2e})")
        ok = ok and mean_error < 1e-5

    subprocess.run(
        [args.bin / "twill-train", work / "job.twx", "--eval",
         "--batch", work / "batch.json", *adapter,
         "--gradients", work / "grads.safetensors"],
        check=True, capture_output=True, text=True)
    grads = load_file(str(work / "grads.safetensors"))
    expected_grads = gradients_by_parameter(expected_grads, grads)
    # Every trainable tensor's gradient, whole (a fused one's too).
    if (len(expected_grads) != len(grads) or
            set(expected_grads) != set(trainable) or
            any(tuple(grads[name + ".grad"].shape) != tuple(grad.shape)
                for name, grad in expected_grads.items())):
        print(f"gradients for {sorted(grads)}, expected "
              f"{sorted(expected_grads)}")
        ok = False
    else:
        floor = 0.0 if lora else 1e-3 * max(
            grad.norm().item() for grad in expected_grads.values())
        worst = max((norm_error(grads[name + ".grad"], grad, floor), name)
                    for name, grad in expected_grads.items())
        print(f"{args.config}: {len(grads)} gradients, worst relative error "
              f"{worst[0]:.2e} ({worst[1]})")
        ok = ok and worst[0] < 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
