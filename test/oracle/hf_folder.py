"""A Hugging Face model folder in, a PEFT adapter and a merged model out.

    python hf_folder.py --bin BUILD/bin --work DIR [--dora] [--family TYPE]

transformers makes a tiny random Llama (or a model of --family, with random
norms and biases) and saves it sharded into two
safetensors files with an index; its folder also holds a Llama 3 format
tokenizer (single bytes: the 512 ids are 256 bytes and 256 special tokens).
Twill trains LoRA on an alpaca JSONL file from that folder alone (the model
section from its config.json, the weights from its shards, the tokenizer
from original/tokenizer.model), writing the adapter and the merged model
(sharded too). Then: PEFT loads the adapter onto the base; transformers
loads the merged model; the merged weights equal PEFT's merge_and_unload
(1e-6) and the two models give the same logits (1e-5). With --dora, a DoRA
adapter (lora.use_dora, lm_head not adapted): the merged rows are scaled
to their magnitudes, as PEFT merges them; and a step at lr 1e-30 leaves the
magnitudes where Twill starts them, each weight row's norm, as PEFT does
(1e-6).
"""
import argparse
import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from peft import PeftModel
from safetensors.torch import load_file
from families import (FAMILIES, GEMMA3_ROPE, randomize_norms_and_biases,
                      some_parameters, some_projections)
from transformers import AutoModelForCausalLM

SHARD_BYTES = 350_000
# Each family's traits beyond Llama's, at this model's sizes.
FAMILY_SETTINGS = {"llama": {}, "qwen2": {},
                   "qwen3": dict(head_dim=24, attention_bias=True),
                   "mistral": dict(head_dim=24, sliding_window=4096),
                   "gemma2": dict(head_dim=24, sliding_window=4,
                                  attn_logit_softcapping=0.05,
                                  final_logit_softcapping=0.2),
                   # The merged config.json must keep both RoPE bases, the
                   # full layers' scaling and the layer types.
                   "gemma3_text": dict(head_dim=24, sliding_window=4,
                                       query_pre_attn_scalar=20,
                                       rope_parameters=GEMMA3_ROPE,
                                       layer_types=["sliding_attention",
                                                    "full_attention"]),
                   # Fused projections; no pad token (its default id is
                   # beyond the vocab).
                   "phi3": dict(sliding_window=4, pad_token_id=None),
                   # A sparse layer and a dense one; the folder holds each
                   # expert's tensors (the Hub's layout), and so does the
                   # merged model (written in the layout read).
                   "qwen3_moe": dict(head_dim=16, num_experts=4,
                                     num_experts_per_tok=2,
                                     moe_intermediate_size=32,
                                     norm_topk_prob=True, mlp_only_layers=[1]),
                   "qwen2_moe": dict(num_experts=4, num_experts_per_tok=2,
                                     moe_intermediate_size=32,
                                     shared_expert_intermediate_size=48,
                                     mlp_only_layers=[1]),
                   # Its experts under block_sparse_moe (w1, w3, w2), in
                   # the folder and in the merged model.
                   "mixtral": dict(head_dim=16, num_local_experts=4,
                                   num_experts_per_tok=2,
                                   intermediate_size=32)}


def make_folder(folder, family):
    torch.manual_seed(0)
    config_class, model_class = FAMILIES[family]
    config = config_class(**{**dict(
        vocab_size=512, hidden_size=64, intermediate_size=160,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=512, rms_norm_eps=1e-5,
        tie_word_embeddings=False), **FAMILY_SETTINGS[family]})
    model = model_class(config).float()
    if family != "llama":
        randomize_norms_and_biases(model)
    model.save_pretrained(folder, max_shard_size=SHARD_BYTES,
                          safe_serialization=True)
    shards = sorted(p.name for p in folder.glob("model-*.safetensors"))
    assert len(shards) == 2, shards
    assert (folder / "model.safetensors.index.json").exists()
    (folder / "original").mkdir(exist_ok=True)
    (folder / "original" / "tokenizer.model").write_text("".join(
        f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--dora", action="store_true")
    parser.add_argument("--family", choices=sorted(FAMILIES), default="llama")
    args = parser.parse_args()
    work = args.work / ("hf_folder" + ("-dora" if args.dora else "")
                        + (f"-{args.family}" if args.family != "llama" else ""))
    folder = work / f"tiny-{args.family}"
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(work, ignore_errors=True)
    folder.mkdir(parents=True)
    make_folder(folder, args.family)

    with open(work / "alpaca.jsonl", "w") as data:
        for i in range(16):
            data.write(json.dumps({"instruction": f"Count to {i % 5 + 1}.",
                                   "input": "" if i % 2 else "in words",
                                   "output": " ".join(["one"] * (i % 5 + 1))})
                       + "\n")
    out = work / "out"
    targets = some_projections(args.family) + (
        [] if args.dora else ["lm_head"])
    (work / "job.textproto").write_text(f"""
checkpoint {{ base_dir: "{folder}" output_dir: "{out}" merged: true
             max_shard_bytes: {SHARD_BYTES} }}
lora {{ rank: 4 alpha: 8 target_modules: {json.dumps(targets)}
        target_parameters: {json.dumps(some_parameters(args.family) or [])}
        use_dora: {str(args.dora).lower()} }}
data {{ path: "{work / 'alpaca.jsonl'}" format: ALPACA }}
train {{ batch_size: 2 seq_len: 256 epochs: 1 max_steps_per_epoch: 4
         lr: 1e-2 }}
""")
    subprocess.run([args.bin / "twillc", work / "job.textproto", "-o",
                    work / "job.twx"], check=True)
    run = subprocess.run([args.bin / "twill-train", work / "job.twx"],
                         capture_output=True, text=True)
    print(run.stdout)
    if run.returncode:
        sys.exit(run.stderr)

    merged_files = sorted(p.name for p in (out / "merged").iterdir())
    print("merged model:", merged_files)
    assert "model.safetensors.index.json" in merged_files, merged_files
    # Its experts are named as the folder's are (the Hub's per-expert
    # layout stays per expert).
    def experts(folder):
        index = json.loads((folder / "model.safetensors.index.json")
                           .read_text())
        return {name for name in index["weight_map"] if "experts" in name}
    if experts(out / "merged") != experts(folder):
        sys.exit(f"FAIL: the merged model's experts "
                 f"{sorted(experts(out / 'merged') ^ experts(folder))[:4]}"
                 f" are not the folder's")

    base = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
    reference = PeftModel.from_pretrained(base, out).merge_and_unload()
    merged = AutoModelForCausalLM.from_pretrained(out / "merged",
                                              torch_dtype=torch.float32)
    worst = 0.0
    expected = reference.state_dict()
    for name, value in merged.state_dict().items():
        worst = max(worst, (value - expected[name]).abs().max().item())
    changed = sum(
        not torch.equal(value, base_value) for value, base_value in zip(
            merged.state_dict().values(),
            AutoModelForCausalLM.from_pretrained(folder).state_dict().values()))
    tokens = torch.tensor([[1, 5, 9, 200, 77, 3, 42, 300]])
    with torch.no_grad():
        difference = (merged(tokens).logits -
                      reference(tokens).logits).abs().max().item()
    print(f"merged weights within {worst:.2e} of PEFT's merge "
          f"({changed} tensors changed by training); logits within "
          f"{difference:.2e}")
    # The base's config.json keys Twill does not model stay the merged
    # model's, and its generation settings come along.
    kept = [key for key in ("bos_token_id", "eos_token_id", "pad_token_id")
            if getattr(merged.config, key) != getattr(base.config, key)]
    if kept or not (out / "merged" / "generation_config.json").exists():
        sys.exit(f"FAIL: the merged config lost {kept} or its "
                 "generation_config.json")
    if args.dora:
        start = work / "start"
        subprocess.run([args.bin / "twillc", work / "job.textproto",
                        "train.lr=1e-30", "train.max_steps_per_epoch=1",
                        f"checkpoint.output_dir={start}", "checkpoint.merged=false",
                        "-o", work / "start.twx"], check=True)
        subprocess.run([args.bin / "twill-train", work / "start.twx"],
                       check=True, capture_output=True)
        adapter = load_file(str(start / "adapter_model.safetensors"))
        # (PEFT merged into `base` itself: the folder again.)
        weights = AutoModelForCausalLM.from_pretrained(folder).state_dict()
        starts = 0.0
        for key, magnitude in adapter.items():
            if key.endswith(".lora_magnitude_vector"):
                module = key.removeprefix("base_model.model.").removesuffix(
                    ".lora_magnitude_vector")
                norms = weights[module + ".weight"].norm(dim=1)
                starts = max(starts, ((magnitude - norms).abs().max()
                                      / norms.abs().max()).item())
        print(f"magnitudes start within {starts:.2e} of the row norms")
        if starts > 1e-6 or not any("magnitude" in k for k in adapter):
            sys.exit("FAIL")
    if worst > 1e-6 or difference > 1e-5 or changed < (6 if args.dora else 7):
        sys.exit("FAIL")


if __name__ == "__main__":
    main()
