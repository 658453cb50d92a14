"""The cuda backend against the cpu backend, on a GPU (skips without one).

    python cuda_vs_cpu.py --bin BUILD/bin --work DIR --config tiny.textproto
        --data train.jsonl

1. One batch through @train_step on both backends, for LoRA and for full
   fine-tuning (every forward and backward kernel, embedding and norm
   weight gradients included): the loss within 1e-2 relative, every
   gradient within 1e-2 (||cuda - cpu|| / ||cpu||); and the same for the
   bf16 programs, their gradients within 1.6e-2, torch.testing's relative
   tolerance for bfloat16 (train.precision=BF16: the cuda kernels read and
   write bf16 as stored, the cpu backend widens it around its fp32 kernels,
   so the two round at different places: the first GPU run found DoRA's
   magnitude gradients 1.05e-2 apart, its fp32 ones 5.8e-7;
   full fine-tuning adds the bf16 norm-weight and the widened embedding
   gradients); LoRA with dropout on every projection, fp32 and bf16
   (both backends draw the same masks); DoRA, fp32 and bf16; and a
   quantized base, NF4 and FP8, fp32 and bf16, and FP8 with its products'
   inputs rounded to e4m3 (the FP8 GEMMs).
2. The tiny job trained for 20 steps on both, in fp32, in bf16 and with
   dropout: per-step losses within 2e-2; and DPO on 80 synthetic
   pre-tokenized preference pairs (written here), its reference run in
   every step and precomputed by @reference's pass before training, whose
   losses on cuda must also be the former's within 1e-5.

Attention on cuda is the chunked kernel (TWILL_CUDA_ATTENTION=chunked) but
in "bf16 LoRA", which must run cuDNN's fused attention (=fused: a shape it
refuses fails the variant): cuDNN plans its graphs in each process anew,
seconds a shape, which 20 processes would spend over and over; the
conformance checks the fused kernels shape by shape.

Exits 77 (ctest: skipped, never passed) where twill-train says there is no
GPU or no CUDA build. A variant that fails on the GPU (an error, a hang past
two minutes, results off) is named and the others still run, so one run
finds every failure; the exit is 1 if any failed.

The programs can be compiled on one machine and run on another (a GPU
machine without the compiler: bench/device_bundle.sh):

    python cuda_vs_cpu.py --bin BIN --work DIR --config tiny.textproto \
        --data train.jsonl --compile-only       # twillc writes DIR/*.twx
    python cuda_vs_cpu.py --bin BIN --work DIR --data train.jsonl \
        --precompiled                           # twill-train runs them

(DIR must be the same path on both: the programs write under it.)
"""
import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

SKIP = 77
JOB = ["model.num_hidden_layers=2", "train.seq_len=32", "train.batch_size=2"]
BF16 = ["train.precision=BF16"]
# LoRA dropout on every projection: the same masks on both backends
# (support/Dropout.h), so the gradients compare as without it.
DROPOUT = ["lora.dropout=0.25", "lora.target_modules=q_proj,k_proj,v_proj,"
           "o_proj,gate_proj,up_proj,down_proj"]
NF4 = ["quantization.base=NF4", "model.intermediate_size=192"]
FP8 = ["quantization.base=FP8"]
# Inputs rounded to e4m3 in blocks of 128 too: hidden 256 and an MLP of
# 384, the forward products cuBLASLt's FP8 GEMMs of e4m3 codes.
FP8_INPUTS = FP8 + ["quantization.fp8_inputs=E4M3_BLOCKS",
                    "model.hidden_size=256", "model.intermediate_size=384"]
VARIANTS = {"LoRA": [], "full fine-tuning": ["full_finetune={}", "lora="],
            "bf16 LoRA": BF16,
            "bf16 full fine-tuning": ["full_finetune={}", "lora="] + BF16,
            "LoRA dropout": DROPOUT, "bf16 LoRA dropout": DROPOUT + BF16,
            "DoRA": ["lora.use_dora=true", "lora.target_modules=q_proj,"
                     "v_proj,o_proj,down_proj"],
            "bf16 DoRA": ["lora.use_dora=true", "lora.target_modules=q_proj,"
                          "v_proj,o_proj,down_proj"] + BF16,
            # A quantized base: NF4 (the tiny MLP of 192: whole blocks of
            # 64) and FP8, each formed by the dequantize kernels.
            "NF4 base": NF4, "bf16 NF4 base": NF4 + BF16,
            "FP8 base": FP8, "bf16 FP8 base": FP8 + BF16,
            "FP8 inputs": FP8_INPUTS, "bf16 FP8 inputs": FP8_INPUTS + BF16}


# The one variant whose attention is cuDNN's fused kernel; every other's is
# the chunked kernel.
FUSED = "bf16 LoRA"


def attention_env(variant):
    """The environment a variant's cuda run takes."""
    return dict(os.environ, TWILL_CUDA_ATTENTION="fused" if variant == FUSED
                else "chunked")


class Failed(Exception):
    """A run that failed: the variant is counted failed, the next runs."""


def run(command, env=None):
    try:
        return subprocess.run([str(c) for c in command], capture_output=True,
                              text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        raise Failed(f"{Path(str(command[0])).name} did not end within 120 s")


# Each program runs on both backends into its folder.
STEPS = ["train.epochs=1", "train.max_steps_per_epoch=20",
         "checkpoint.overwrite_output_dir=true"]
DPO = ["train.objective=DPO", "data.format=PREFERENCE", "train.seq_len=16",
       "train.batch_size=4"]
# The 20-step training runs, fp32 and bf16, and DPO's.
TRAINING = {"train": STEPS, "train-bf16": STEPS + BF16,
            "train-dropout": STEPS + DROPOUT,
            "train-dpo": STEPS + DPO + ["dpo.reference=ADAPTER_OFF"],
            "train-dpo-precomputed": STEPS + DPO
            + ["dpo.reference=PRECOMPUTED"]}


def program_name(variant):
    return variant.replace(" ", "-").lower()


def compile_job(args, name, overrides):
    """The program and its output folder: compiled now, or earlier with
    --compile-only."""
    program = args.work / f"{name}.twx"
    out = args.work / f"{name}-out"
    if args.precompiled:
        if not program.exists():
            sys.exit(f"{program} is missing: compile with --compile-only")
        return program, out
    result = run([args.bin / "twillc", args.config, *JOB, *overrides,
                  f"checkpoint.output_dir={out}", "-o", program])
    if result.returncode:
        sys.exit(result.stderr)
    return program, out


def batch_file(work, vocab=512, batch=2, seq=32):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (batch, seq))
    labels = np.roll(tokens, -1, axis=1)
    labels[:, -1] = -100
    positions = np.tile(np.arange(seq), (batch, 1))
    segments = np.zeros((batch, seq), dtype=np.int64)
    path = work / "batch.json"
    path.write_text(json.dumps({
        "tokens": tokens.tolist(), "labels": labels.tolist(),
        "positions": positions.tolist(), "segments": segments.tolist()}))
    return path


def eval_step(args, program, batch, backend, variant):
    gradients = args.work / f"{program.stem}-{backend}-grads.safetensors"
    result = run([args.bin / "twill-train", program, "--eval", "--batch",
                  batch, "--gradients", gradients, f"--backend={backend}"],
                 attention_env(variant))
    if result.returncode:
        if backend == "cuda" and ("needs a GPU" in result.stderr or
                                  "without CUDA" in result.stderr):
            print(f"SKIPPED: {result.stderr.strip()}")
            sys.exit(SKIP)
        raise Failed(f"{backend}: {result.stderr.strip()}")
    found = re.search(r"^loss (\S+)", result.stdout, re.MULTILINE)
    if not found:
        raise Failed(f"{backend}: no loss in its output:\n{result.stdout}")
    return float(found.group(1)), load_file(gradients)


def preference_pairs(work, vocab=512, pairs=80):
    """Pre-tokenized pairs (no tokenizer needed): prompts of 2 to 6 ids,
    completions of 1 to 6."""
    rng = np.random.default_rng(1)
    ids = lambda low, high: rng.integers(3, vocab, rng.integers(low, high + 1))
    path = work / "pairs.jsonl"
    path.write_text("".join(
        json.dumps({"prompt_ids": ids(2, 6).tolist(),
                    "chosen_ids": ids(1, 6).tolist(),
                    "rejected_ids": ids(1, 6).tolist()}) + "\n"
        for _ in range(pairs)))
    return path


def train(args, program, out, backend, data):
    # Each backend computes a precomputed reference itself: none is kept
    # from the other's run.
    (out / "reference_logps.jsonl").unlink(missing_ok=True)
    result = run([args.bin / "twill-train", program, "--data", data,
                  f"--backend={backend}"], attention_env(None))
    if result.returncode:
        raise Failed(f"{backend}: {result.stderr.strip()}")
    return [json.loads(line)["loss"]
            for line in (out / "metrics.jsonl").read_text().splitlines()]


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--bin", "--work", "--config", "--data"):
        parser.add_argument(flag, type=Path,
                            required=flag != "--config")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile-only", action="store_true")
    mode.add_argument("--precompiled", action="store_true")
    args = parser.parse_args()
    if not args.precompiled and not args.config:
        parser.error("--config is needed to compile the programs")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.compile_only:
        for variant, overrides in VARIANTS.items():
            compile_job(args, program_name(variant), overrides)
        for name, overrides in TRAINING.items():
            compile_job(args, name, overrides)
        return
    batch = batch_file(args.work)
    failures = []
    for variant, overrides in VARIANTS.items():
        program, _ = compile_job(args, program_name(variant), overrides)
        try:
            cpu_loss, cpu_grads = eval_step(args, program, batch, "cpu",
                                            variant)
            cuda_loss, cuda_grads = eval_step(args, program, batch, "cuda",
                                              variant)
        except Failed as failure:
            failures.append(f"{variant}: {failure}")
            print(f"{variant}: FAILED: {failure}", flush=True)
            continue
        # Written so that a NaN fails: no comparison with it holds.
        if not abs(cuda_loss - cpu_loss) <= 1e-2 * abs(cpu_loss):
            failures.append(f"{variant}: loss {cuda_loss} vs cpu {cpu_loss}")
        errors = []
        tolerance = 1.6e-2 if BF16[0] in overrides else 1e-2
        for name, reference in cpu_grads.items():
            errors.append(np.linalg.norm(cuda_grads[name] - reference) /
                          max(np.linalg.norm(reference), 1e-12))
            if not errors[-1] <= tolerance:
                failures.append(f"{variant}: gradient {name} off by "
                                f"{errors[-1]}")
        worst = np.max(errors) if errors else 0.0  # NaN if any is
        print(f"{variant}: loss {cuda_loss:.6f} vs {cpu_loss:.6f}, "
              f"{len(cpu_grads)} gradients within {worst:.1e}"
              + (" (cuDNN's fused attention)" if variant == FUSED else ""),
              flush=True)

    pairs = preference_pairs(args.work)
    cuda_losses = {}
    for name, overrides in TRAINING.items():
        program, out = compile_job(args, name, overrides)
        data = pairs if DPO[0] in overrides else args.data
        try:
            cpu = train(args, program, out, "cpu", data)
            cuda = cuda_losses[name] = train(args, program, out, "cuda", data)
        except Failed as failure:
            failures.append(f"{name}: {failure}")
            print(f"{name}: FAILED: {failure}", flush=True)
            continue
        errors = [abs(a - b) / abs(b) for a, b in zip(cuda, cpu)]
        worst = max(errors, default=0.0)
        if len(cuda) != len(cpu) or not all(e <= 2e-2 for e in errors):
            failures.append(f"{name}: cuda {cuda} vs cpu {cpu}")
        print(f"{name}: {len(cuda)} steps, losses within {worst:.1e} of cpu",
              flush=True)
    # A precomputed reference trains as the reference run in every step.
    every, once = (cuda_losses.get(name)
                   for name in ("train-dpo", "train-dpo-precomputed"))
    if every and once:
        worst = max((abs(a - b) / abs(b) for a, b in zip(once, every)),
                    default=0.0)
        if len(once) != len(every) or not worst <= 1e-5:
            failures.append(f"DPO precomputed on cuda: {once} vs {every}")
        print(f"DPO precomputed on cuda: losses within {worst:.1e} of the "
              f"reference in every step", flush=True)
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
