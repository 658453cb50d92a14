"""A bitsandbytes 4-bit checkpoint, as people download them, read by Twill
against transformers + bitsandbytes.

    python bnb_checkpoint.py --bin BUILD/bin --work DIR

A tiny Llama (bf16; 48 wide, so that a row is not a block of 64) is
quantized by transformers with bitsandbytes (its cpu backend) to NF4, with
and without double quantization, and saved as transformers saves 4-bit
models. Twill runs its forward pass from that folder (`twill-train --eval
--dump-logits`); the reference is the same model in fp32 with each
Linear4bit's weight replaced by bitsandbytes' own dequantize_4bit of it:
the logits must agree within 1e-5 (the same weights, both in fp32), on
one rank and on 2x2 (FSDP x tensor parallel: each rank keeps its block of
each dequantized weight). Then
Twill trains a step from the double-quantized folder and writes the merged
model, which transformers must load as a plain model (no
quantization_config). Last, the checkpoints Twill does not read are
refused by name: 8-bit, and 4-bit FP4.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import bitsandbytes.functional as bnb_functional
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
from bitsandbytes.nn import Linear4bit
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, BitsAndBytesConfig,
                          LlamaConfig, LlamaForCausalLM)

VOCAB, BATCH, SEQ = 97, 2, 16


def quantized(work, name, double):
    """The tiny model saved as a 4-bit checkpoint, and the 4-bit model."""
    folder = work / name
    model = AutoModelForCausalLM.from_pretrained(
        work / "base", device_map="cpu",
        quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=double,
            bnb_4bit_compute_dtype=torch.bfloat16))
    model.save_pretrained(folder)
    return folder, model


def dequantized(weight):
    """bitsandbytes' dequantize_4bit of a Linear4bit weight, by its flat
    blocks: its portable implementation, as its CUDA kernel computes. (Its
    cpu kernel's AVX-512 path takes a row's scales from absmax[row * (width
    // blocksize)], wrong where a row is not a whole number of blocks, as
    the 48 wide rows here are: 0.15 of the logits off.)"""
    state = weight.quant_state
    absmax = state.absmax
    if state.nested:
        absmax = bnb_functional.dequantize_blockwise(absmax, state.state2)
        absmax += state.offset
    return _dequantize_4bit_compute(weight.data.reshape(-1), absmax,
                                    state.code, state.blocksize, state.shape,
                                    state.dtype)


def reference_logits(work, four_bit, tokens):
    """The fp32 model whose linear weights are bitsandbytes' dequantized."""
    model = LlamaForCausalLM.from_pretrained(work / "base",
                                             torch_dtype=torch.float32)
    weights = {}
    for name, module in four_bit.named_modules():
        if isinstance(module, Linear4bit):
            weights[name + ".weight"] = dequantized(module.weight).float()
    assert weights, "no Linear4bit in the quantized model"
    missing = set(weights) - set(model.state_dict())
    assert not missing, missing
    model.load_state_dict(weights, strict=False)
    with torch.no_grad():
        return model(input_ids=tokens).logits


def twill_logits(args, work, folder, tokens, mesh=()):
    """Twill's logits from `folder`; with `mesh` (dp, tp), from every rank
    of that mesh, each dequantizing and keeping its block."""
    labels = torch.full((BATCH, SEQ), -100)
    labels[:, :-1] = tokens[:, 1:]
    (work / "batch.json").write_text(json.dumps({
        "tokens": tokens.tolist(), "labels": labels.tolist(),
        "positions": torch.arange(SEQ).repeat(BATCH, 1).tolist(),
        "segments": torch.zeros(BATCH, SEQ, dtype=torch.long).tolist()}))
    job = work / f"{folder.name}.textproto"
    job.write_text(f'checkpoint {{ base_dir: "{folder}" }}\nlora {{}}\n'
                   f"train {{ batch_size: {BATCH} seq_len: {SEQ} }}\n")
    split = ([f"parallel.dp={mesh[0]}", f"parallel.tp={mesh[1]}"]
             if mesh else [])
    subprocess.run([args.bin / "twillc", job, *split, "-o",
                    work / "job.twx"], check=True)
    ranks = (["mpirun", "--oversubscribe", "-np", str(mesh[0] * mesh[1])]
             if mesh else [])
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run([*ranks, args.bin / "twill-train", work / "job.twx",
                    "--eval", "--batch", work / "batch.json",
                    "--dump-logits", work / "logits.safetensors"],
                   check=True, capture_output=True, env=env)
    return load_file(str(work / "logits.safetensors"))["logits"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=48,
                         intermediate_size=80, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(work / "base")
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ),
                           generator=torch.Generator().manual_seed(1))
    failures = []
    for name, double in (("nf4", False), ("nf4-double", True)):
        folder, four_bit = quantized(work, name, double)
        expected = reference_logits(work, four_bit, tokens)
        for mesh in ((), (2, 2)):
            actual = twill_logits(args, work, folder, tokens, mesh)
            error = ((actual - expected).norm() / expected.norm()).item()
            where = f" on {mesh[0]}x{mesh[1]}" if mesh else ""
            print(f"{name}{where}: logits within {error:.2e} of "
                  f"bitsandbytes' dequantized model")
            if not error < 1e-5:
                failures.append(f"{name}{where}: logits off by {error}")

    # Trained from the 4-bit folder, merged: a plain model.
    data = work / "train.jsonl"
    data.write_text("".join(json.dumps({"input_ids": row}) + "\n"
                            for row in tokens.tolist()))
    job = work / "merge.textproto"
    job.write_text(
        f'checkpoint {{ base_dir: "{work / "nf4-double"}" output_dir: '
        f'"{work / "out"}" merged: true }}\nlora {{}}\n'
        f'train {{ batch_size: 1 seq_len: {SEQ} epochs: 1 }}\n'
        f'data {{ path: "{data}" }}\n')
    subprocess.run([args.bin / "twillc", job, "-o", work / "merge.twx"],
                   check=True)
    subprocess.run([args.bin / "twill-train", work / "merge.twx"], check=True,
                   capture_output=True)
    merged_config = json.loads((work / "out" / "merged" /
                                "config.json").read_text())
    if "quantization_config" in merged_config:
        failures.append("the merged config.json keeps quantization_config")
    merged = AutoModelForCausalLM.from_pretrained(work / "out" / "merged")
    if any(isinstance(m, Linear4bit) for m in merged.modules()):
        failures.append("the merged model loads as a 4-bit one")
    print("merged from the 4-bit base: transformers loads it as a plain model")

    # What is not read is refused by name.
    for name, settings, message in (
            ("int8", {"quant_method": "bitsandbytes", "load_in_8bit": True},
             "this one is quant_method 'bitsandbytes' without 4-bit NF4"),
            ("fp4", {"quant_method": "bitsandbytes", "load_in_4bit": True,
                     "bnb_4bit_quant_type": "fp4"},
             "without 4-bit NF4"),
            ("gptq", {"quant_method": "gptq", "bits": 4},
             "this one is quant_method 'gptq'")):
        folder = work / name
        shutil.copytree(work / "base", folder)
        settings_config = json.loads((folder / "config.json").read_text())
        settings_config["quantization_config"] = settings
        (folder / "config.json").write_text(json.dumps(settings_config))
        job = work / f"{name}.textproto"
        job.write_text(f'checkpoint {{ base_dir: "{folder}" }}\nlora {{}}\n')
        result = subprocess.run([args.bin / "twillc", job, "-o",
                                 work / "refused.twx"],
                                capture_output=True, text=True)
        if result.returncode == 0 or message not in result.stderr:
            failures.append(f"{name}: not refused as expected: "
                            f"{result.stderr.strip()}")
        else:
            print(f"{name}: refused: {result.stderr.strip().splitlines()[-1]}")
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
