"""Multi-rank training equals single-rank training, on every mesh.

    python mesh_equivalence.py --bin BUILD/bin --work DIR --data train.jsonl
                               [--families]

Compiles the tiny job for meshes 1x1, 2x1, 1x2, 2x2, 1x4 and 4x1 and trains
each under mpirun for 5 steps with gradient accumulation. The job is chosen
to hit every divisibility trap: 2 KV heads (tp=4 replicates them), a
sequence length of 30 (sequence parallelism pads it to 32 on tp=4), a vocab
of 509 (vocab parallelism pads it to 512), LoRA rank 3 on every projection
and lm_head, and a batch of 3 rows (FSDP and the batch pad on dp=2, 4). Every
mesh's per-step losses must match the 1x1 run within 1e-5 relative, and its
adapter (written once, unsharded) within 1e-5 absolute (LoRA weights here are
at most ~0.14; B starts at zero, so a B tensor's own scale after 5 steps is
small and AdamW's division by near-zero second moments makes its relative
differences, of float summation order only, look larger).

Then each mesh starts again from the base the 1x1 run wrote (a real
safetensors checkpoint): its first loss must be the same, and each rank must
read only its blocks of the checkpoint: on 4x1 (FSDP alone) the ranks
together read every tensor byte exactly once; on every mesh each rank reads
at most 1/dp of it (and tp splits most of that again).

On every mesh, the job also trains with the attention gradient
recomputing each row's softmax statistics instead of reading the
forward's (TWILL_ATTENTION_STATISTICS=recompute): losses and adapter
within 1e-6 of the kept statistics' (the probabilities are exp(logit - lse)
in one, exp(logit - max) / sum in the other).

On every mesh of more than one rank (the variants' too), the job also
trains with parallel.overlap_communication=false (each collective waited
where it starts): twill-schedule only moves when collectives start and are
waited, so the losses and the adapter must be the same, bit for bit.

Last, variants of the job against their own 1x1 run: full fine-tuning
(every gradient reduce-scattered, the embedding's too), tied embeddings (one
vocab-parallel table for the embedding and lm_head), no sequence
parallelism (tp partial sums all-reduced, not scattered), and tp=3 (no head
count or MLP size divides by it); bf16 (train.precision=BF16), whose 1x1
losses must also be within 1e-2 of fp32's; full and selective
activation checkpointing, and full checkpointing with the kept layer inputs
offloaded to host memory, and both for layer 0 only (the rest kept), whose
1x1 losses must equal those without it, bit for bit; and the tiled loss (linear_cross_entropy, tiles of 7 of the 90
tokens; lm_head not adapted, so that its logits are one product), whose
1x1 losses must be within 1e-6 relative of the whole logits' and its
adapter within 1e-6 (the tiles' GEMMs may sum in another order). Full
fine-tuning runs with tiles of 7 too: the lm_head's gradient sums them.
The tiled MLP (parallel.mlp_tile_tokens=7, with full checkpointing: each
tile recomputed right before its backward) and the tiled attention
projections (parallel.attention_tile_tokens=7) likewise against their
untiled programs; on tp > 1 their tiles are blocked, each rank cutting its
own block of the sequence (tiles of 2 x 4 positions on 1x4, of 4 x 2 on
2x2), so the tiles differ from 1x1's and only the rounding agrees.
rsLoRA; DoRA, alone and with dropout; LoRA dropout (0.25; its masks keyed by each element's place) on every
projection, on tp=3 with padded MLP blocks, and with tiled, recomputed
attention (against its untiled program): every mesh drops the same
elements, so its losses are 1x1's. A quantized base (NF4), its blocks
split over tp where tp divides them and whole where it does not, and with
DoRA, checkpointing and tiles; an FP8 base.

With --families, the other model families instead, each against its own
1x1 run on 2x2, 1x4 and 1x3 (tp=3 divides no head count), with
checkpointing and every tile: Qwen2 (q, k and v biases, tied embeddings, a
window of 5 on its second layer), Qwen3 (per-head q and k norms, head_dim
12 of hidden 64 and 4 heads, attention biases), Qwen3-MoE and Qwen2-MoE
(on 2x1, 4x1, 1x2, 2x2 and 1x4: each sparse layer whole on every tp rank;
with the routers' load-balancing loss, a shared expert, NF4 experts) and
Mistral (head_dim 12, a
window of 7 of the 30 positions), Phi-3 (fused projections, with DoRA and
dropout too); and full fine-tuning of each family's biases (Llama's attention
and MLP biases without sequence parallelism: all-reduced partial sums),
which start at zero and train away from it.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

MESHES = [(1, 1), (2, 1), (1, 2), (2, 2), (1, 4), (4, 1)]
JOB = [
    "model.num_hidden_layers=2", "model.vocab_size=509", "lora.rank=3",
    "lora.alpha=6", "train.seq_len=30", "train.batch_size=3",
    "train.gradient_accumulation_steps=2", "train.epochs=1",
    "train.max_steps_per_epoch=5",
]
TOLERANCE = 1e-5
# bf16 rounds every computed value (to 2^-8 relative); a mesh rounds its
# partial sums before reducing them, so meshes agree to bf16's precision,
# and so does bf16 with fp32.
BF16_TOLERANCE = 1e-2
# name: (overrides, meshes, tolerance)
VARIANTS = {
    "full fine-tuning": (["full_finetune={}", "lora=",
                          "parallel.loss_tile_tokens=7"], [(2, 2), (1, 4)],
                         TOLERANCE),
    "tied embeddings": (["model.tie_word_embeddings=true"], [(2, 2), (1, 4)],
                        TOLERANCE),
    "no sequence parallelism": (["parallel.sequence_parallel=false"],
                                [(2, 2), (1, 4)], TOLERANCE),
    # tp=3 splits neither the 4 query heads (attention runs whole on every
    # rank) nor the MLP's 170 (padded to 171).
    "tp=3, MLP of 170": (["model.intermediate_size=170"], [(1, 3), (2, 3)],
                         TOLERANCE),
    # bf16 weights and activations, gathered in bf16; fp32 masters.
    "bf16": (["train.precision=BF16"], [(2, 2), (1, 4)], BF16_TOLERANCE),
    # Decoder layers recomputed in the backward, FSDP gathers included.
    "activation checkpointing": (["parallel.activation_checkpointing=FULL"],
                                 [(2, 2), (4, 1)], TOLERANCE),
    # Only norms and SwiGLU recomputed, from values the backward holds.
    "selective checkpointing": (
        ["parallel.activation_checkpointing=SELECTIVE"], [(2, 2), (1, 4)],
        TOLERANCE),
    # What the backward reads (each layer's input) kept in host memory
    # between the forward and the backward.
    "offloaded checkpoints": (
        ["parallel.activation_checkpointing=FULL",
         "parallel.offload_activations=true"], [(2, 2), (1, 4)], TOLERANCE),
    # What parallel.memory_budget_gb may choose: layer 0 recomputed and its
    # input offloaded, layer 1 keeping every activation on the device.
    "checkpoint and offload of layer 0 only": (
        ["parallel.activation_checkpointing=FULL",
         "parallel.checkpoint_layers=1", "parallel.offload_activations=true",
         "parallel.offload_layers=1"], [(2, 2), (1, 4)], TOLERANCE),
    # Each layer's MLP over tiles of 7 positions (the last of 2), with its
    # recompute tile by tile.
    "tiled MLP": (["parallel.mlp_tile_tokens=7",
                   "parallel.activation_checkpointing=FULL"],
                  [(2, 2), (1, 4)], TOLERANCE),
    # The attention block's projections over tiles of 7 positions: under
    # sequence parallelism each rank tiles its own block (twill.split's
    # blocks), each tile gathered and scattered on its own.
    "tiled attention": (["parallel.attention_tile_tokens=7"],
                        [(2, 2), (1, 4)], TOLERANCE),
    # The loss formed 7 tokens at a time (the last tile of 6).
    "tiled loss": (
        ["lora.target_modules=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,"
         "down_proj", "parallel.loss_tile_tokens=7"], [(2, 2), (1, 4)],
        TOLERANCE),
    # Rank-stabilised LoRA: alpha / sqrt(rank) in the products.
    "rsLoRA": (["lora.use_rslora=true"], [(2, 2), (1, 4)], TOLERANCE),
    # LoRA's dropout on every projection: the masks are keyed by each
    # element's place (token in the batch, global feature), so every mesh
    # drops the same elements, o_proj's and down_proj's sharded features
    # (padded at tp=3) included.
    "LoRA dropout": (
        ["lora.dropout=0.25", "lora.target_modules=q_proj,k_proj,v_proj,"
         "o_proj,gate_proj,up_proj,down_proj"], [(2, 2), (1, 4)], TOLERANCE),
    "LoRA dropout, tp=3, MLP of 170": (
        ["lora.dropout=0.25", "model.intermediate_size=170",
         "lora.target_modules=q_proj,o_proj,down_proj"], [(1, 3)], TOLERANCE),
    # DoRA: the norms of row layers' weights split over tp are partial sums
    # all-reduced; the magnitudes start as the rows' norms on every mesh.
    "DoRA": (["lora.use_dora=true", "lora.target_modules=q_proj,k_proj,"
              "v_proj,o_proj,gate_proj,up_proj,down_proj"], [(2, 2), (1, 4)],
             TOLERANCE),
    "DoRA with dropout, tp=3, MLP of 170": (
        ["lora.use_dora=true", "lora.dropout=0.25",
         "model.intermediate_size=170",
         "lora.target_modules=q_proj,o_proj,up_proj,down_proj"],
        [(1, 3), (2, 2)], TOLERANCE),
    # Tiles and recomputation drop what the untiled step drops.
    "LoRA dropout, tiled attention, recomputed": (
        ["lora.dropout=0.25", "lora.target_modules=q_proj,v_proj,o_proj",
         "parallel.attention_tile_tokens=7",
         "parallel.activation_checkpointing=FULL"], [(2, 2), (1, 4)],
        TOLERANCE),
    # A quantized base (NF4): the MLP's 192 columns are 3 blocks of 64 a
    # row, which tp=3 splits and tp=2 and 4 keep whole (down_proj formed
    # whole, each rank slicing its columns); o_proj's 64 one block, whole
    # on every tp. FSDP gathers the bytes.
    "NF4 base": (["quantization.base=NF4", "model.intermediate_size=192"],
                 [(2, 2), (1, 4), (1, 3)], TOLERANCE),
    # Hidden 128: o_proj's 2 blocks split on tp=2 and 4; the MLP's 256 (4
    # blocks) on tp=2 and 4, whole on tp=3; recomputed, every tile; DoRA's
    # norms of the formed weights, and its magnitudes started from them.
    "NF4 base, DoRA, layers recomputed, tiles": (
        ["quantization.base=NF4", "model.hidden_size=128",
         "model.intermediate_size=256", "lora.use_dora=true",
         "lora.target_modules=q_proj,o_proj,up_proj,down_proj",
         "parallel.activation_checkpointing=FULL",
         "parallel.mlp_tile_tokens=7", "parallel.attention_tile_tokens=7"],
        [(2, 2), (1, 4), (1, 3)], TOLERANCE),
    # An FP8 base: e4m3 values and a scale per row, split as any weight.
    # (Names with "checkpoint" are held to their 1x1 losses being those
    # without it: these change the model.)
    "FP8 base, selective recomputation": (
        ["quantization.base=FP8", "parallel.activation_checkpointing=SELECTIVE"],
        [(2, 2), (1, 3)], TOLERANCE),
}
TILES = ["parallel.mlp_tile_tokens=7", "parallel.attention_tile_tokens=7",
         "parallel.loss_tile_tokens=7"]
PROJECTIONS = ("lora.target_modules=q_proj,k_proj,v_proj,o_proj,gate_proj,"
               "up_proj,down_proj")
PHI3_PROJECTIONS = ("lora.target_modules=qkv_proj,o_proj,gate_up_proj,"
                    "down_proj,lm_head")
FAMILY_MESHES = [(2, 2), (1, 4), (1, 3)]
FAMILY_VARIANTS = {
    # Layer 1 slides over 5 positions (max_window_layers).
    "Qwen2, full checkpointing, tiles": (
        ["model.model_type=qwen2", "model.tie_word_embeddings=true",
         "model.use_sliding_window=true", "model.sliding_window=5",
         "model.max_window_layers=1", PROJECTIONS,
         "parallel.activation_checkpointing=FULL", *TILES],
        FAMILY_MESHES, TOLERANCE),
    # Biases start at zero (as transformers starts them) and train: a
    # row layer's (o_proj, down_proj) added to partial sums would count once
    # per rank.
    "Qwen2, full fine-tuning": (
        ["model.model_type=qwen2", "full_finetune={}", "lora=",
         *TILES], [(2, 2), (1, 3)], TOLERANCE),
    "Qwen3 with attention biases, full fine-tuning": (
        ["model.model_type=qwen3", "model.head_dim=12",
         "model.attention_bias=true", "full_finetune={}", "lora="],
        [(2, 2), (1, 3)], TOLERANCE),
    "Llama with every bias, full fine-tuning": (
        ["model.attention_bias=true", "model.mlp_bias=true",
         "full_finetune={}", "lora=", "parallel.sequence_parallel=false"],
        [(2, 2), (1, 3)], TOLERANCE),
    "Qwen3, selective checkpointing, tiles": (
        ["model.model_type=qwen3", "model.head_dim=12",
         "model.attention_bias=true", PROJECTIONS,
         "parallel.activation_checkpointing=SELECTIVE", *TILES],
        FAMILY_MESHES, TOLERANCE),
    # Gemma 3's layer: a sliding layer (window 6, RoPE base 1e4) and a full
    # one (linear RoPE scaling), (1 + w) norms before and after each block,
    # GeGLU, scaled embeddings; tied, as Gemma is.
    "Gemma 3, selective checkpointing, tiles": (
        ["model.model_type=gemma3_text", "model.head_dim=12",
         "model.query_pre_attn_scalar=16", "model.sliding_window=6",
         "model.rope_local_base_freq=10000",
         "model.rope_scaling={rope_type: 'linear' factor: 4}",
         "model.tie_word_embeddings=true",
         "model.layer_types=sliding_attention,full_attention", PROJECTIONS,
         "parallel.activation_checkpointing=SELECTIVE", *TILES],
        FAMILY_MESHES, TOLERANCE),
    "Gemma 3, full fine-tuning": (
        ["model.model_type=gemma3_text", "model.head_dim=12",
         "model.sliding_window=6",
         "model.layer_types=sliding_attention,full_attention",
         "full_finetune={}", "lora=", "parallel.activation_checkpointing=FULL"],
        [(2, 2), (1, 3)], TOLERANCE),
    # Gemma 2: every other layer slides; soft-capped scores and logits (the
    # capped logits are formed whole: loss_tile_tokens leaves them be).
    "Gemma 2, full checkpointing, tiles": (
        ["model.model_type=gemma2", "model.head_dim=12",
         "model.sliding_window=6", "model.attn_logit_softcapping=0.05",
         "model.final_logit_softcapping=0.5",
         "model.tie_word_embeddings=true", PROJECTIONS,
         "parallel.activation_checkpointing=FULL", *TILES],
        FAMILY_MESHES, TOLERANCE),
    # Phi-3's fused projections: each block of rows of qkv_proj and
    # gate_up_proj split as its projection (on tp=4 q's 4 heads split and
    # k's and v's 2 stay whole; tp=3 splits none), one A shared by the
    # blocks; DoRA's magnitudes and LoRA dropout on them too.
    "Phi-3, fused projections, full checkpointing, tiles": (
        ["model.model_type=phi3", "model.rope_scaling=",
         "model.sliding_window=7", PHI3_PROJECTIONS,
         "parallel.activation_checkpointing=FULL", *TILES],
        FAMILY_MESHES, TOLERANCE),
    "Phi-3, DoRA and dropout, selective checkpointing": (
        ["model.model_type=phi3", "model.rope_scaling=",
         PHI3_PROJECTIONS.removesuffix(",lm_head"), "lora.use_dora=true", "lora.dropout=0.25",
         "parallel.activation_checkpointing=SELECTIVE"],
        FAMILY_MESHES, TOLERANCE),
    "Phi-3, full fine-tuning": (
        ["model.model_type=phi3", "model.rope_scaling=", "full_finetune={}",
         "lora=", *TILES], [(2, 2), (1, 3)], TOLERANCE),
    # Qwen3-MoE: a sparse layer (4 experts, 2 a token) and a dense one;
    # the batch rows, each sorted by expert among its own tokens, split
    # over dp, the experts' weights fully sharded; its MLP tiled (each tile
    # its own dispatch) and recomputed; LoRA on the router and the experts
    # too; the routers' load-balancing loss, whose sums are over every
    # rank's tokens. Under tp each sparse layer runs whole on every rank.
    "Qwen3-MoE, load-balancing loss, selective checkpointing, tiled MLP": (
        ["model.model_type=qwen3_moe", "model.head_dim=12",
         "model.num_experts=4", "model.num_experts_per_tok=2",
         "model.moe_intermediate_size=24", "model.norm_topk_prob=true",
         "model.mlp_only_layers=1", "model.output_router_logits=true",
         "model.router_aux_loss_coef=0.1",
         "lora.target_modules=q_proj,k_proj,v_proj,o_proj,lm_head,gate",
         "lora.target_parameters=mlp.experts.gate_up_proj,"
         "mlp.experts.down_proj",
         "parallel.activation_checkpointing=SELECTIVE",
         "parallel.mlp_tile_tokens=7"],
        [(2, 1), (4, 1), (1, 2), (2, 2), (1, 4)], TOLERANCE),
    # Qwen2-MoE's shared expert behind its sigmoid gate, beside 4 experts
    # of which 3 a token; LoRA on the shared expert's gate and the router.
    "Qwen2-MoE, shared expert": (
        ["model.model_type=qwen2_moe", "model.num_experts=4",
         "model.num_experts_per_tok=3", "model.moe_intermediate_size=24",
         "model.shared_expert_intermediate_size=40",
         "lora.target_modules=q_proj,v_proj,gate,shared_expert_gate"],
        [(2, 1), (4, 1), (1, 2), (2, 2), (1, 4)], TOLERANCE),
    # An NF4 base whose experts' weights are quantized as their rows,
    # fully sharded over dp in whole rows of blocks.
    "Qwen3-MoE, NF4 experts": (
        ["model.model_type=qwen3_moe", "model.head_dim=16",
         "model.num_experts=4", "model.num_experts_per_tok=2",
         "model.moe_intermediate_size=64", "model.intermediate_size=128",
         "quantization.base=NF4",
         "lora.target_modules=q_proj,v_proj",
         "lora.target_parameters=mlp.experts.gate_up_proj,"
         "mlp.experts.down_proj"],
        [(2, 1), (4, 1), (1, 2), (2, 2), (1, 4)], TOLERANCE),
    "Qwen3-MoE, full fine-tuning": (
        ["model.model_type=qwen3_moe", "model.head_dim=12",
         "model.num_experts=4", "model.num_experts_per_tok=2",
         "model.moe_intermediate_size=24", "full_finetune={}", "lora="],
        [(2, 1)], TOLERANCE),
    # A window of 7 of the 30 positions, the attention projections tiled.
    "Mistral, sliding window, full checkpointing": (
        ["model.model_type=mistral", "model.head_dim=12",
         "model.sliding_window=7", "parallel.attention_tile_tokens=7",
         "parallel.activation_checkpointing=FULL"], FAMILY_MESHES, TOLERANCE),
}
# A transformation that changes the arithmetic's order only: losses and
# adapter as the untransformed program's, to float rounding. Tiling variants
# against their program with the option that tiles set to 0.
EXACTNESS = 1e-6
UNTILED = {"tiled loss": "parallel.loss_tile_tokens",
           "tiled MLP": "parallel.mlp_tile_tokens",
           "tiled attention": "parallel.attention_tile_tokens",
           "LoRA dropout, tiled attention, recomputed":
               "parallel.attention_tile_tokens"}


def train(bin_dir, work, data, config, dp, tp, weights=None, variant=(),
          statistics="kept"):
    """Trains on a dp x tp mesh, attention's gradient reading the forward's
    statistics or recomputing them (`statistics`); returns the per-step
    losses, the adapter (None for full fine-tuning) and the checkpoint
    bytes each rank read."""
    name = f"mesh{dp}x{tp}" + ("-from-base" if weights else "")
    if statistics != "kept":
        name += f"-statistics-{statistics}"
    if variant:
        # Its keys, and a hash of the values: two variants of one key (FULL
        # and SELECTIVE checkpointing) are two runs, each in its folder.
        keys = "-".join(v.split("=")[0] for v in variant)[:80]
        name += "-" + keys + "-" + hashlib.sha1(
            " ".join(variant).encode()).hexdigest()[:12]
    out = work / name
    program = work / f"{name}.twx"
    subprocess.run([str(bin_dir / "twillc"), str(config), *JOB, *variant,
                    f"parallel.dp={dp}", f"parallel.tp={tp}",
                    f"checkpoint.output_dir={out}", "-o", str(program)],
                   check=True)
    env = dict(os.environ, OMP_NUM_THREADS="1",
               TWILL_ATTENTION_STATISTICS=statistics)
    command = ["mpirun", "-np", str(dp * tp), "--oversubscribe", "-x",
               "TWILL_ATTENTION_STATISTICS",
               str(bin_dir / "twill-train"), str(program), "--data", str(data)]
    if weights:
        command += ["--weights", str(weights)]
    run = subprocess.run(command, env=env, capture_output=True, text=True,
                         timeout=600)
    if run.returncode != 0:
        sys.exit(f"{dp}x{tp}: twill-train failed\n{run.stdout}{run.stderr}")
    losses = [json.loads(line)["loss"]
              for line in (out / "metrics.jsonl").read_text().splitlines()]
    read = {int(rank): int(count) for rank, count in re.findall(
        r"rank (\d+)/\d+: read (\d+) bytes of checkpoint tensors",
        run.stdout)}
    adapter = out / "adapter_model.safetensors"
    return losses, load_file(adapter) if adapter.exists() else None, read


def check_unscheduled(bin_dir, work, data, config, dp, tp, losses, adapter,
                      variant, failures):
    """Trains again with every collective waited where it starts: the same
    losses and adapter, bit for bit, as with collectives in flight."""
    blocking = [*variant, "parallel.overlap_communication=false"]
    waited, waited_adapter, _ = train(bin_dir, work, data, config, dp, tp,
                                      variant=blocking)
    same = waited == losses and (adapter is None) == (waited_adapter is None)
    if same and adapter is not None:
        same = adapter.keys() == waited_adapter.keys() and all(
            np.array_equal(adapter[k], waited_adapter[k]) for k in adapter)
    if not same:
        failures.append(f"{dp}x{tp} {' '.join(variant)}: collectives in "
                        f"flight change the results: losses {losses} vs "
                        f"{waited} waited at once")


def check_recomputed(args, dp, tp, losses, adapter, failures):
    """Trains again with the softmax statistics recomputed in attention's
    gradient: the same losses and adapter as kept ones, to rounding."""
    again, again_adapter, _ = train(args.bin, args.work, args.data,
                                    args.config, dp, tp,
                                    statistics="recompute")
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(again, losses))
    worst = max(np.abs(again_adapter[k] - adapter[k]).max() for k in adapter)
    if (len(again) != len(losses) or worst_loss > EXACTNESS
            or worst > EXACTNESS):
        failures.append(f"{dp}x{tp}: statistics recomputed give losses "
                        f"{again}, adapter within {worst:.1e}, against kept "
                        f"{losses}")
    print(f"{dp}x{tp}, statistics recomputed: losses within "
          f"{worst_loss:.1e}, adapter within {worst:.1e} of kept")


def check_variants(args, variants, reference_losses, failures):
    """Each variant on its meshes against its own 1x1 run (and, where it
    says, against the untiled program or the plain job's losses)."""
    for variant, (overrides, meshes, tolerance) in variants.items():
        alone, alone_adapter, _ = train(args.bin, args.work, args.data,
                                        args.config, 1, 1, variant=overrides)
        if variant in UNTILED:
            untiled = [o for o in overrides
                       if not o.startswith(UNTILED[variant])]
            untiled.append(UNTILED[variant] + "=0")
            whole, whole_adapter, _ = train(args.bin, args.work, args.data,
                                            args.config, 1, 1, variant=untiled)
            worst_loss = max(abs(a - b) / abs(b) for a, b in zip(alone, whole))
            worst = max(np.abs(alone_adapter[k] - whole_adapter[k]).max()
                        for k in whole_adapter)
            if worst_loss > EXACTNESS or worst > EXACTNESS:
                failures.append(f"{variant} 1x1: losses {alone} vs {whole} "
                                f"untiled, adapter within {worst:.1e}")
            print(f"{variant}, 1x1: losses within {worst_loss:.1e}, adapter "
                  f"within {worst:.1e} of the untiled program's")
        if (reference_losses and "checkpoint" in variant
                and alone != reference_losses):
            # Recomputing is computing the same values again: bit-identical.
            failures.append(f"{variant} 1x1: losses {alone} vs "
                            f"{reference_losses} without it")
        if variant == "bf16":
            worst = max(abs(a - b) / abs(b)
                        for a, b in zip(alone, reference_losses))
            if worst > tolerance:
                failures.append(f"bf16 1x1: losses {alone} vs fp32 "
                                f"{reference_losses}")
            print(f"bf16, 1x1: losses within {worst:.1e} of fp32")
        for dp, tp in meshes:
            losses, adapter, _ = train(args.bin, args.work, args.data,
                                       args.config, dp, tp, variant=overrides)
            check_unscheduled(args.bin, args.work, args.data, args.config, dp,
                              tp, losses, adapter, overrides, failures)
            worst = max(abs(a - b) / abs(b) for a, b in zip(losses, alone))
            if len(losses) != len(alone) or worst > tolerance:
                failures.append(f"{variant}, {dp}x{tp}: losses {losses} vs "
                                f"1x1 {alone}")
            print(f"{variant}, {dp}x{tp}: losses within {worst:.1e} of 1x1")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--families", action="store_true")
    parser.add_argument("--only", default="",
                        help="the families' variants whose names hold this")
    args = parser.parse_args()
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    failures = []
    if args.families:
        chosen = {name: variant for name, variant in FAMILY_VARIANTS.items()
                  if args.only in name}
        if not chosen:
            sys.exit(f"--only {args.only!r} names no variant")
        check_variants(args, chosen, None, failures)
        if failures:
            sys.exit("\n".join(failures))
        print("every family's meshes match its 1x1")
        return

    reference_losses, reference, _ = train(args.bin, args.work, args.data,
                                           args.config, 1, 1)
    assert len(reference_losses) == 5, reference_losses
    check_recomputed(args, 1, 1, reference_losses, reference, failures)
    for dp, tp in MESHES[1:]:
        losses, adapter, _ = train(args.bin, args.work, args.data,
                                   args.config, dp, tp)
        worst_loss = max(abs(a - b) / abs(b)
                         for a, b in zip(losses, reference_losses))
        if len(losses) != len(reference_losses) or worst_loss > TOLERANCE:
            failures.append(f"{dp}x{tp}: losses {losses} vs 1x1 "
                            f"{reference_losses}")
        if adapter.keys() != reference.keys():
            failures.append(f"{dp}x{tp}: adapter tensors differ: "
                            f"{sorted(adapter.keys() ^ reference.keys())}")
            continue
        worst = max(np.abs(adapter[k] - reference[k]).max() for k in reference)
        if worst > TOLERANCE:
            failures.append(f"{dp}x{tp}: adapter differs by {worst:.2e}")
        print(f"{dp}x{tp}: losses within {worst_loss:.1e}, adapter within "
              f"{worst:.1e} of 1x1")
        check_recomputed(args, dp, tp, losses, adapter, failures)
        check_unscheduled(args.bin, args.work, args.data, args.config, dp, tp,
                          losses, adapter, [], failures)

    # Again from the 1x1 run's base checkpoint: the same start, and each
    # rank reads only its blocks.
    base = args.work / "mesh1x1" / "base"
    whole = sum(t.nbytes for t in
                load_file(base / "model.safetensors").values())
    for dp, tp in MESHES:
        losses, _, read = train(args.bin, args.work, args.data, args.config,
                                dp, tp, weights=base)
        if abs(losses[0] - reference_losses[0]) > TOLERANCE * reference_losses[0]:
            failures.append(f"{dp}x{tp} from the base: first loss "
                            f"{losses[0]} vs {reference_losses[0]}")
        if sorted(read) != list(range(dp * tp)):
            failures.append(f"{dp}x{tp}: not every rank said what it read: "
                            f"{read}")
            continue
        # dp splits everything (tp all but the norms), in blocks of
        # ceil(rows / dp): the first ranks may hold a row more per tensor.
        bound = whole / dp * 1.02
        if max(read.values()) > bound:
            failures.append(f"{dp}x{tp}: a rank read {max(read.values())} of "
                            f"{whole} bytes (more than 1/dp)")
        if tp == 1 and sum(read.values()) != whole:
            failures.append(f"{dp}x1: the ranks read {sum(read.values())} "
                            f"bytes together, not the checkpoint's {whole}")
        print(f"{dp}x{tp} from the base: ranks read "
              f"{sorted(read.values())} of {whole} bytes")
    check_variants(args, VARIANTS, reference_losses, failures)

    if failures:
        sys.exit("\n".join(failures))
    print(f"every mesh matches 1x1 ({len(reference)} adapter tensors)")


if __name__ == "__main__":
    main()
