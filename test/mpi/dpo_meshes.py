"""DPO (train.objective DPO) trains alike on every mesh.

    python dpo_meshes.py --bin BUILD/bin --work DIR --config tiny.textproto
                         --data data/preference/train.jsonl

The tiny model trained for 12 steps (2 micro-batches each, so that the
step accumulates) on the synthetic preference pairs of data/preference, a
pair a row (chosen and rejected side by side, seq_len 16 each): on 2x2,
1x4 and 1x3 every step's loss and TRL metrics (rewards/chosen, /rejected,
/margins, logps/chosen, /rejected) must be 1x1's within 1e-5 (|a - b| /
max(1, |b|)), and the adapter within 5e-5 absolute (its values reach
~0.1; AdamW's division by second moments near zero makes a difference of
summation order alone look larger). rewards/accuracies counts the pairs
whose chosen reward is ahead: a pair whose two rewards are within rounding
of each other (early on, when every reward is near 0) may land either way
on another mesh, so a step may differ by one pair (1/8), no more. The
variants: the sigmoid loss with every projection and lm_head adapted (the
policy's log-probabilities from its whole logits, the reference's a tile
at a time); lm_head not adapted, with FULL activation checkpointing and
the loss in tiles of 7 positions (both log-probabilities tiled, the
reference's layers beside the recomputed policy's); FULL checkpointing
with the kept layer inputs offloaded and the MLP and attention in tiles;
IPO, hinge and robust; an NF4 and an FP8 base (QLoRA: the reference is the
quantized base). The first step's loss must be the loss of a policy equal to
its reference (log 2, (1 / (2 beta))^2, 1, log 2): the adapter starts as nothing
(B = 0).

A precomputed reference (dpo.reference PRECOMPUTED: @reference's first pass
over the data, read by the steps) must train as the reference run in every
step (ADAPTER_OFF): on 1x1 every step's figures and the adapter within 1e-6
of the ADAPTER_OFF variant it names in fp32, and on the meshes as any
variant. In bf16 the two references round differently (the precomputed one
is the model as training starts, traced as the policy, its zero adapter in
it; ADAPTER_OFF's has no adapter path): the precomputed one's first loss
is log 2, as the policy is its reference.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

from safetensors.numpy import load_file
import numpy as np

METRICS = ["loss", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
           "rewards/margins", "logps/chosen", "logps/rejected"]
JOB = ["train.objective=DPO", "data.format=PREFERENCE", "train.seq_len=16",
       "train.batch_size=4", "train.gradient_accumulation_steps=2",
       "train.epochs=1", "train.max_steps_per_epoch=12", "train.lr=1e-2",
       "data.shuffle=false", "dpo.reference=ADAPTER_OFF"]
PROJECTIONS = ("lora.target_modules=q_proj,k_proj,v_proj,o_proj,gate_proj,"
               "up_proj,down_proj")
MESHES = [(2, 2), (1, 4), (1, 3)]
TILED = [PROJECTIONS, "parallel.activation_checkpointing=FULL",
         "parallel.loss_tile_tokens=7"]
PRECOMPUTED = ["dpo.reference=PRECOMPUTED"]
BF16 = ["train.precision=BF16"]
NF4 = ["quantization.base=NF4", "model.intermediate_size=192"]
# name: (overrides, the first step's loss (the policy is the reference;
#        None: not checked),
#        the meshes compared with its 1x1, the variant its 1x1 must equal)
VARIANTS = {
    "sigmoid": ([], math.log(2), MESHES, None),
    "tiled, FULL checkpointing": (TILED, math.log(2), MESHES, None),
    "offload, MLP and attention tiles": (
        ["parallel.activation_checkpointing=FULL",
         "parallel.offload_activations=true", "parallel.mlp_tile_tokens=5",
         "parallel.attention_tile_tokens=7"], math.log(2), MESHES, None),
    "ipo": (["dpo.loss_type=IPO"], (1 / (2 * 0.1)) ** 2, MESHES, None),
    "hinge": (["dpo.loss_type=HINGE", "dpo.beta=0.5"], 1.0, MESHES, None),
    "robust": (["dpo.loss_type=ROBUST", "dpo.label_smoothing=0.1"],
               math.log(2), MESHES, None),
    "precomputed": (PRECOMPUTED, math.log(2), MESHES, "sigmoid"),
    "tiled, FULL checkpointing, precomputed": (
        TILED + PRECOMPUTED, math.log(2), MESHES,
        "tiled, FULL checkpointing"),
    # QLoRA: a quantized base is the reference too (NF4's MLP of 192: whole
    # blocks of 64).
    "NF4 base": (NF4, math.log(2), MESHES, None),
    "NF4 base, precomputed": (NF4 + PRECOMPUTED, math.log(2), [], "NF4 base"),
    "FP8 base": (["quantization.base=FP8"], math.log(2), MESHES, None),
    # A full fine-tune: its reference the model before training, precomputed
    # (the "adapter" compared is then the whole model).
    "full fine-tuning, precomputed": (
        ["full_finetune={}", "lora="] + PRECOMPUTED, math.log(2), MESHES,
        None),
    # Not log 2 in bf16: the adapted lm_head's logits are held in bf16,
    # the reference's (a tile at a time) in fp32.
    "bf16": (BF16, None, [], None),
    # The precomputed reference is the model as training starts, traced as
    # the policy is (its zero adapter and lm_head's bf16 logits in it): log 2
    # exactly, where ADAPTER_OFF's rounds otherwise.
    "bf16, precomputed": (BF16 + PRECOMPUTED, math.log(2), [], None),
}
PAIRS = 8  # a step's: 2 micro-batches of 4


def train(args, name, variant, dp, tp):
    out = args.work / f"{name}-{dp}x{tp}"
    program = args.work / f"{name}-{dp}x{tp}.twx"
    subprocess.run([args.bin / "twillc", args.config, *JOB, *variant,
                    f"data.path={args.data}", f"parallel.dp={dp}",
                    f"parallel.tp={tp}", f"checkpoint.output_dir={out}",
                    "-o", program], check=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    run = subprocess.run(["mpirun", "-np", str(dp * tp), "--oversubscribe",
                          args.bin / "twill-train", program],
                         env=env, capture_output=True, text=True, timeout=600)
    if run.returncode:
        sys.exit(f"{name} {dp}x{tp}: twill-train failed\n{run.stdout}"
                 f"{run.stderr}")
    steps = [json.loads(line)
             for line in (out / "metrics.jsonl").read_text().splitlines()]
    adapter = out / "adapter_model.safetensors"
    return steps, load_file(adapter if adapter.exists()
                            else out / "model.safetensors")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    failures = []
    single = {}  # each variant's 1x1 run
    for name, (variant, first, meshes, same_as) in VARIANTS.items():
        slug = name.replace(" ", "-").replace(",", "")
        reference, adapter = single[name] = train(args, slug, variant, 1, 1)
        if first is not None and (abs(reference[0]["loss"] - first)
                                  > 1e-6 * max(1.0, first)):
            failures.append(f"{name}: the first loss {reference[0]['loss']} "
                            f"is not {first} (the policy is the reference)")
        if same_as:
            steps, other = single[same_as]
            worst = max(abs(s[k] - r[k]) / max(1.0, abs(r[k]))
                        for s, r in zip(steps, reference) for k in METRICS)
            worst_adapter = max(float(np.abs(other[k] - adapter[k]).max())
                                for k in adapter)
            ok = (len(steps) == len(reference) and worst <= 1e-6
                  and worst_adapter <= 1e-6)
            print(f"{name} 1x1: metrics within {worst:.2e}, adapter within "
                  f"{worst_adapter:.2e} of {same_as}"
                  f"{'' if ok else '  FAIL'}")
            if not ok:
                failures.append(f"{name} against {same_as}")
        for dp, tp in meshes:
            steps, meshed = train(args, slug, variant, dp, tp)
            worst = max(abs(s[k] - r[k]) / max(1.0, abs(r[k]))
                        for s, r in zip(steps, reference) for k in METRICS
                        if k != "rewards/accuracies")
            flipped = max(abs(s["rewards/accuracies"]
                              - r["rewards/accuracies"]) * PAIRS
                          for s, r in zip(steps, reference))
            worst_adapter = max(float(np.abs(meshed[k] - adapter[k]).max())
                                for k in adapter)
            ok = (len(steps) == len(reference) and worst <= 1e-5
                  and flipped <= 1 + 1e-6 and worst_adapter <= 5e-5)
            print(f"{name} {dp}x{tp}: {len(steps)} steps, metrics within "
                  f"{worst:.2e} (accuracies: {flipped:.0f} pair the other "
                  f"way at most), adapter within {worst_adapter:.2e} of 1x1"
                  f"{'' if ok else '  FAIL'}")
            if not ok:
                failures.append(f"{name} {dp}x{tp}")
        print(f"{name} 1x1: loss {reference[0]['loss']:.6f} -> "
              f"{reference[-1]['loss']:.6f}, rewards/accuracies "
              f"{reference[-1]['rewards/accuracies']:.2f}")
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
