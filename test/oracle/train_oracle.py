"""Oracle test of Twill's training against torch.optim.AdamW + PEFT.

    python train_oracle.py --bin BUILD/bin --work DIR [--dropout RATE]
                           [--rslora] [--dora] [--family MODEL_TYPE]
                           [--quantized nf4|fp8] [--router-aux-loss COEF]

Trains the same LoRA adapter on the same tiny model (Llama, or the
family's: random norms and biases, and its traits of FAMILY_SETTINGS) and
data with Twill and
with PyTorch for 10 optimizer steps with gradient accumulation 2, a loss
normalised by the tokens of each step, global-norm clipping (tight enough
to act), weight decay, linear warmup and cosine decay; step 5 has no
labelled token, so neither updates, and the schedule moves on past it in
both (scheduler.step() every iteration). Per-step losses must
agree within 1e-6 relative, the final adapters within 1e-5 (max abs
difference / max abs value), and PEFT must load Twill's adapter and give
Twill's logits (1e-5). With --dropout, LoRA dropout at that rate on both
sides: PEFT's lora_dropout draws test/oracle/dropout.py's masks for each
row's micro-batch and place in it, as Twill keys its own. With --rslora,
rank-stabilised LoRA (alpha / sqrt(rank)) on both sides; with --dora, DoRA
(both start the magnitudes at the weights' row norms). With --quantized, a
quantized base (quantization.base NF4, QLoRA, or FP8; hidden 64, an MLP of
128): Twill quantizes the fp32 base on load, the reference trains on the
dequantized weights (bitsandbytes', or torch's float8_e4m3fn casts:
qlora_oracle.py; a mixture of experts' weights as their rows), and
Twill's merged model must be PEFT's merge_and_unload of the dequantized
base (1e-5).
"""
import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import dropout
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from families import (FAMILIES, GEMMA3_ROPE, load_balancing_loss,
                      randomize_norms_and_biases, some_parameters,
                      some_projections, tiny_model)
from transformers import AutoModelForCausalLM
from qlora_oracle import dequantize_projections

VOCAB, SEQ, BATCH, ACCUMULATION, STEPS = 97, 12, 2, 2, 10
UNLABELLED_STEP = 5  # its rows have no labelled token: no update
LR, WARMUP, WEIGHT_DECAY, MAX_NORM = 2e-3, 3, 0.1, 0.05
RANK, ALPHA = 4, 8.0
# What each family's tiny model has beyond Llama's: Qwen2's tied embeddings
# (its q, k and v biases it always has), Qwen3's and Mistral-Nemo's head_dim
# other than hidden / heads, Qwen3's attention biases, Mistral's sliding
# window (5 of the 12 positions), Gemma 2's soft-caps, Gemma 3's layer (a
# sliding layer and a full one, their RoPE bases, GeGLU, its norms, tied
# embeddings), Phi-3's fused projections and window (no pad token: its
# default id is beyond the tiny vocab), Qwen3-MoE's sparse and dense layers,
# Qwen2-MoE's shared expert and Mixtral's experts (4, 2 a token; LoRA on
# attention, the router, the shared expert's gate and the experts).
FAMILY_SETTINGS = {"llama": {}, "qwen2": dict(tie_word_embeddings=True),
                   "qwen3": dict(head_dim=12, attention_bias=True),
                   "mistral": dict(head_dim=12, sliding_window=5),
                   "gemma2": dict(head_dim=12, query_pre_attn_scalar=16,
                                  sliding_window=5,
                                  attn_logit_softcapping=0.05,
                                  final_logit_softcapping=0.2),
                   "gemma3_text": dict(
                       head_dim=12, query_pre_attn_scalar=16,
                       sliding_window=5, rope_parameters=GEMMA3_ROPE,
                       layer_types=["sliding_attention", "full_attention"]),
                   "phi3": dict(sliding_window=5, pad_token_id=None),
                   "qwen3_moe": dict(head_dim=12, num_experts=4,
                                     num_experts_per_tok=2,
                                     moe_intermediate_size=16,
                                     norm_topk_prob=True, mlp_only_layers=[1]),
                   "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2,
                                     moe_intermediate_size=16,
                                     shared_expert_intermediate_size=24,
                                     mlp_only_layers=[1]),
                   "mixtral": dict(head_dim=12, sliding_window=5,
                                   num_local_experts=4,
                                   num_experts_per_tok=2,
                                   intermediate_size=16)}


def make_examples():
    generator = torch.Generator().manual_seed(3)
    examples = []
    for row in range(STEPS * ACCUMULATION * BATCH):
        length = int(torch.randint(3, SEQ + 1, (1,), generator=generator))
        ids = torch.randint(0, VOCAB, (length,), generator=generator).tolist()
        labels = [-100, -100] + ids[2:]  # the prompt is not trained on
        if row // (ACCUMULATION * BATCH) == UNLABELLED_STEP - 1:
            labels = [-100] * length
        examples.append({"input_ids": ids, "labels": labels})
    return examples


def lr_lambda(step):
    if step < WARMUP:
        return step / max(1, WARMUP)
    progress = (step - WARMUP) / max(1, STEPS - WARMUP)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def reference_training(model, examples, masks, aux_coef=None):
    """Each step's loss, and with `aux_coef` the routers' load-balancing
    loss too, as the Hugging Face Trainer adds it under accumulation: coef
    x each micro-batch's, added to the step's mean loss (returned: each
    step's loss and its micro-batches' mean load-balancing loss)."""
    model.train()  # PEFT's DoRA drops only in training mode
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=LR, betas=(0.9, 0.999),
                                  eps=1e-8, weight_decay=WEIGHT_DECAY)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    losses, aux_means = [], []
    for step in range(STEPS):
        rows = examples[step * ACCUMULATION * BATCH:
                        (step + 1) * ACCUMULATION * BATCH]
        total, count = 0.0, 0
        sums, routers = [], [[] for _ in range(ACCUMULATION)]
        for index, example in enumerate(rows):
            ids = torch.tensor([example["input_ids"]])
            if masks:  # Twill's micro-batch number and token index
                micro, row = divmod(index, BATCH)
                masks.at(step * ACCUMULATION + micro,
                         range(row * SEQ, row * SEQ + ids.shape[1]))
            targets = torch.tensor(example["labels"][1:] + [-100])
            output = model(input_ids=ids,
                           output_router_logits=aux_coef is not None)
            logits = output.logits[0]
            if aux_coef is not None:
                routers[index // BATCH].append(output.router_logits)
            counted = targets != -100
            sums.append(torch.nn.functional.cross_entropy(
                logits[counted], targets[counted], reduction="sum"))
            count += int(counted.sum())
        if count == 0:
            # Nothing to learn: no update, but the schedule moves on, as a
            # loop that calls scheduler.step() every iteration.
            scheduler.step()
            losses.append(None)
            aux_means.append(None)
            continue
        loss = torch.stack(sums).sum() / count
        if aux_coef is not None:
            aux = [load_balancing_loss(model, micro) for micro in routers]
            loss = loss + aux_coef * torch.stack(aux).sum()
            aux_means.append(torch.stack(aux).mean().item())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, MAX_NORM)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses, aux_means


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--rslora", action="store_true")
    parser.add_argument("--dora", action="store_true")
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llama")
    parser.add_argument("--quantized", choices=["nf4", "fp8"])
    parser.add_argument("--router-aux-loss", type=float, metavar="COEF")
    args = parser.parse_args()
    aux = args.router_aux_loss
    work = args.work / ("train" + ("-dropout" if args.dropout else "")
                        + ("-rslora" if args.rslora else "")
                        + ("-dora" if args.dora else "")
                        + (f"-{args.family}" if args.family != "llama" else "")
                        + (f"-{args.quantized}" if args.quantized else "")
                        + ("-aux" if aux is not None else ""))
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    torch.manual_seed(0)
    # NF4 quantizes rows of whole blocks of 64 values (an expert's too).
    sizes = (dict(hidden_size=64, intermediate_size=128) if args.quantized
             else {})
    if args.quantized and "num_experts_per_tok" in FAMILY_SETTINGS[args.family]:
        sizes.update(moe_intermediate_size=64, head_dim=16)
    if aux is not None:  # the checkpoint's config asks for it
        sizes.update(output_router_logits=True, router_aux_loss_coef=aux)
    base = tiny_model(args.family, vocab_size=VOCAB, num_key_value_heads=2,
                      **{**FAMILY_SETTINGS[args.family], **sizes})
    if args.family != "llama":
        randomize_norms_and_biases(base)
    base.save_pretrained(work / "base")
    if args.quantized:
        dequantize_projections(base, args.quantized)
    targets = some_projections(args.family)
    parameters = some_parameters(args.family)
    model = get_peft_model(base, LoraConfig(
        r=RANK, lora_alpha=ALPHA, lora_dropout=args.dropout,
        use_rslora=args.rslora, use_dora=args.dora, target_modules=targets,
        target_parameters=parameters, init_lora_weights=False))
    model.save_pretrained(work / "initial")
    # Twill's masks in place of PEFT's dropout; training mode changes
    # nothing else here.
    masks = dropout.install(model, 0, args.dropout) if args.dropout else None
    model.eval()

    examples = make_examples()
    with open(work / "train.jsonl", "w") as out:
        for example in examples:
            out.write(json.dumps(example) + "\n")
    modules = "".join(f' target_modules: "{t}"' for t in targets) + "".join(
        f' target_parameters: "{p}"' for p in parameters or [])
    (work / "job.textproto").write_text(f"""
checkpoint {{ base_dir: "{work / 'base'}" output_dir: "{work / 'out'}"
             merged: {str(bool(args.quantized)).lower()} }}
lora {{ rank: {RANK} alpha: {ALPHA}{modules} dropout: {args.dropout}
        use_rslora: {str(args.rslora).lower()}
        use_dora: {str(args.dora).lower()} }}
quantization {{ base: {(args.quantized or "none").upper()} }}
data {{ path: "{work / 'train.jsonl'}" packed: false shuffle: false }}
train {{
  batch_size: {BATCH} seq_len: {SEQ} gradient_accumulation_steps: {ACCUMULATION}
  epochs: 1 lr: {LR} warmup_steps: {WARMUP} weight_decay: {WEIGHT_DECAY}
  max_grad_norm: {MAX_NORM}
}}
""")
    subprocess.run([args.bin / "twillc", work / "job.textproto", "-o",
                    work / "job.twx"], check=True)
    subprocess.run([args.bin / "twill-train", work / "job.twx", "--adapter",
                    work / "initial"], check=True)

    expected, aux_means = reference_training(model, examples, masks, aux)
    model.eval()
    if masks:
        masks.enabled = False
    metrics = [json.loads(line) for line in
               (work / "out" / "metrics.jsonl").read_text().splitlines()]
    ok = len(metrics) == STEPS
    for step, (line, torch_loss) in enumerate(zip(metrics, expected), start=1):
        if torch_loss is None:
            skipped = line.get("skipped") is True and "loss" not in line
            ok = ok and skipped and line["step"] == step
            print(f"step {step}: no labelled token; twill "
                  f"{'skipped it' if skipped else 'did not skip it'}")
            continue
        twill = line["loss"]
        error = abs(twill - torch_loss) / abs(torch_loss)
        ok = ok and error < 1e-6 and line["step"] == step
        print(f"step {step}: loss twill {twill:.6f} torch {torch_loss:.6f} "
              f"(relative {error:.1e})")
        if aux is not None:
            twill_aux, torch_aux = (line["router_aux_loss"],
                                    aux_means[step - 1])
            aux_error = abs(twill_aux - torch_aux) / abs(torch_aux)
            ok = ok and aux_error < 1e-6
            print(f"  load-balancing loss twill {twill_aux:.6f} torch "
                  f"{torch_aux:.6f} (relative {aux_error:.1e})")

    adapter = load_file(str(work / "out" / "adapter_model.safetensors"))
    worst = 0.0
    for name, parameter in model.named_parameters():
        if "lora_" not in name:
            continue
        key = name.replace("lora_magnitude_vector.default.weight",
                           "lora_magnitude_vector").replace(".default.", ".")
        reference = parameter.detach()
        error = ((adapter[key] - reference).abs().max()
                 / reference.abs().max()).item()
        worst = max(worst, error)
    print(f"final adapter: {len(adapter)} tensors, worst relative error "
          f"{worst:.1e}")
    tensors = sum("lora_" in name for name, _ in model.named_parameters())
    ok = ok and worst < 1e-5 and len(adapter) == tensors

    # PEFT loads Twill's adapter and computes Twill's logits.
    loaded_base = AutoModelForCausalLM.from_pretrained(work / "base")
    if args.quantized:
        dequantize_projections(loaded_base, args.quantized)
    loaded = PeftModel.from_pretrained(loaded_base, work / "out").eval()
    ids = torch.tensor([examples[0]["input_ids"] + [0] * (SEQ - len(
        examples[0]["input_ids"]))] * BATCH)
    batch = {"tokens": ids.tolist(), "labels": [[-100] * SEQ] * BATCH,
             "positions": [list(range(SEQ))] * BATCH,
             "segments": [[0] * SEQ] * BATCH}
    (work / "batch.json").write_text(json.dumps(batch))
    subprocess.run([args.bin / "twill-train", work / "job.twx", "--eval",
                    "--batch", work / "batch.json", "--adapter", work / "out",
                    "--dump-logits", work / "logits.safetensors"],
                   check=True, capture_output=True)
    twill_logits = load_file(str(work / "logits.safetensors"))["logits"]
    with torch.no_grad():
        peft_logits = loaded(input_ids=ids).logits
    error = ((twill_logits - peft_logits).abs().max()
             / peft_logits.abs().max()).item()
    print(f"PEFT-loaded adapter: logits relative error {error:.1e}")
    ok = ok and error < 1e-5
    if args.quantized:
        # The merged model: the dequantized base plus the adapter, as
        # PEFT merges it (the experts' weights too).
        merged = AutoModelForCausalLM.from_pretrained(work / "out" / "merged")
        expected = loaded.merge_and_unload().state_dict()
        written = merged.state_dict()
        worst = max(((written[name] - tensor).abs().max()
                     / tensor.abs().max().clamp(min=1e-30)).item()
                    for name, tensor in expected.items())
        print(f"merged model: {len(written)} tensors, worst relative error "
              f"{worst:.1e} of PEFT's merge_and_unload")
        ok = ok and worst < 1e-5 and set(written) == set(expected)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
