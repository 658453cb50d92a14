"""Oracle test of a quantized base (quantization.base NF4, QLoRA; or FP8)
against bitsandbytes (or torch's float8_e4m3fn), transformers and PEFT.

    python qlora_oracle.py --bin BUILD/bin --work DIR [--format nf4|fp8]

A tiny Llama in fp32 (hidden 128, 4 heads of 32, 2 KV heads, an MLP of
192: each projection's rows whole blocks of 64) is saved as it is, and
again as transformers saves it quantized by bitsandbytes on the cpu (NF4,
double quantization: the 4-bit checkpoints people download).

1. Twill quantizes the fp32 folder on load and writes what it holds
   (`twill-train --write-base`): a 4-bit folder as transformers saves one.
   Against bitsandbytes' folder, every tensor must be the same, byte for
   byte: each weight's 4-bit codes, scale codes, nested scales and maps,
   and the offset of the double quantization (the scales' mean, which
   Twill sums in the order torch sums on one thread, as it does for fewer
   than 32,768 scales), and every tensor not quantized. transformers must
   load Twill's folder as a 4-bit model whose logits are those of its
   model of bitsandbytes' folder, to the bit. Twill also reads
   bitsandbytes' folder as it is: its logits must be those from quantizing
   on load, to the bit.
2. The reference is the fp32 model in float64 with each projection's
   weight bitsandbytes' dequantized one (its quantize_4bit and
   dequantize, as QLoRA computes with them), and a PEFT LoRA of rank 4 on
   every projection, A and B random so that they matter. Twill's logits
   and loss must be within 1e-5 of it, and its gradients of the summed
   loss with respect to every A and B within 1e-5 (||twill - torch|| /
   ||torch||).
3. On 2x2, 1x4 and 1x3 Twill's logits and gradients must be within 1e-5
   of its 1x1 ones: tp=2 and tp=4 split o_proj's 2 blocks a row and keep
   down_proj's 3 whole, tp=3 the other way round; FSDP gathers the bytes.
4. Trained from the 4-bit folder on 2x2 with checkpoint.merged, the merged
   model (the dequantized base plus the adapter, as PEFT merges a 4-bit
   base) is a plain model transformers loads, whose logits are Twill's of
   the 4-bit base and the trained adapter (1e-5).
5. 4-bit folders a quantized base cannot hold as they are are refused, by
   name: scales without double quantization, and a quant state that lacks
   a part.

With --format fp8 the base is FP8 instead: each projection's weight e4m3
with a scale per row (its largest magnitude over 448), the reference's
weights (w / scale).to(torch.float8_e4m3fn) times the scale; steps 2 to 4,
step 4 from the fp32 folder (there is no FP8 checkpoint to read).

With --fp8-inputs as well (quantization.fp8_inputs E4M3_BLOCKS) each
projection's product reads its input rounded to e4m3 in blocks of 128
(hidden 256 and an MLP of 384: 2 and 3 blocks a row; tp=2 splits o_proj's
2, tp=3 down_proj's 3), the reference's a pre-hook on each base layer: the
block's largest magnitude over 448 its scale, the input over it cast to
float8_e4m3fn and back, times it, passed straight through for the
gradient. Rounding is not continuous: an input within an ulp of a
rounding boundary (the order of a sum decides it) lands on either side,
and moves its product by an e4m3 step: the logits of that position (and
a little of those after it) move by up to about 1e-3. So here every
position's logits but at most 3 of the 24 must be within 1e-5 of the
reference that rounds, and all within 1e-2; the loss within 1e-4 and the
gradients (which sum over every position) within 1e-2. Twill must be ten
times nearer to that reference than to the one that does not round (the
rounding is there, and the same). The meshes are held to 1x1 alike.
Steps 2 and 3 only (the merged model does not round).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import bitsandbytes.functional as bnb_functional
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
from bitsandbytes.nn import Linear4bit
import numpy as np
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import (AutoModelForCausalLM, BitsAndBytesConfig,
                          LlamaConfig, LlamaForCausalLM)

from model_oracle import (gradients_by_parameter, norm_error, relative_error,
                          trainable_parameters)

VOCAB, BATCH, SEQ, RANK, ALPHA = 97, 2, 12, 4, 8.0
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
               "up_proj", "down_proj"]
MESHES = [(2, 2), (1, 4), (1, 3)]


def rounded_in_blocks(x, block=128):
    """`x`'s last dim rounded to e4m3 in blocks of `block`, each over its
    largest magnitude / 448 (fp32, as an FP8 GEMM's input), the gradient
    passed as it is."""
    size = x.shape[-1]
    blocks = torch.nn.functional.pad(x.float(), (0, -size % block))
    blocks = blocks.unflatten(-1, (-1, block))
    scale = blocks.abs().amax(-1, keepdim=True) / 448
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    rounded = ((blocks / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
               .float() * scale).flatten(-2)[..., :size]
    return x + (rounded.to(x.dtype) - x).detach()


def round_base_inputs(model):
    """Each LoRA projection's base layer reads its input rounded."""
    for name, module in model.named_modules():
        if name.endswith("base_layer"):
            module.register_forward_pre_hook(
                lambda _, inputs: (rounded_in_blocks(inputs[0]),))


def close_but_for_flips(actual, expected):
    """Whether logits `actual` are `expected`'s within 1e-5 at every
    position but at most 3, within 1e-2 at all (fp8_inputs: an input
    rounded the other way at a boundary moves its position's logits);
    returns that and the worst and the count beyond 1e-5."""
    actual = actual.to(expected.dtype)
    scale = expected.abs().max().item() or 1.0
    errors = (actual - expected).abs().amax(-1).flatten() / scale
    beyond = int((errors > 1e-5).sum())
    worst = errors.max().item()
    return beyond <= 3 and worst < 1e-2, worst, beyond


def fp8_dequantized(weight):
    """`weight` in e4m3 with a scale per row, and back: torch's
    float8_e4m3fn cast of the weight over its row's scale."""
    scale = weight.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448
    return (weight / scale).to(torch.float8_e4m3fn).float() * scale


def nf4_dequantized(weight):
    """bitsandbytes' NF4 of `weight` with double quantization, dequantized:
    quantize_4bit (its cpu backend), the scales' dequantize_blockwise plus
    the offset, and each level times its scale (its portable dequantize,
    the arithmetic of its CUDA kernel)."""
    codes, state = bnb_functional.quantize_4bit(
        weight, blocksize=64, compress_statistics=True, quant_type="nf4")
    absmax = bnb_functional.dequantize_blockwise(state.absmax, state.state2)
    absmax += state.offset
    return _dequantize_4bit_compute(codes.reshape(-1), absmax, state.code,
                                    state.blocksize, state.shape, state.dtype)


EXPERT_WEIGHTS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


def dequantize_projections(model, format="nf4"):
    """Each projection's weight replaced by its quantized and dequantized
    self (NF4 or FP8), what a quantized base computes with; a mixture of
    experts' weights [experts, out, in] as their rows [experts x out, in],
    as bitsandbytes quantizes a tensor flattened."""
    dequantized = fp8_dequantized if format == "fp8" else nf4_dequantized
    with torch.no_grad():
        for name, module in model.named_modules():
            if name.rsplit(".", 1)[-1] in PROJECTIONS:
                module.weight.copy_(dequantized(module.weight))
        for name, parameter in model.named_parameters():
            if name.endswith(EXPERT_WEIGHTS):
                rows = parameter.reshape(-1, parameter.shape[-1])
                parameter.copy_(dequantized(rows).reshape(parameter.shape))
    return model


def save_four_bit(work, name, double):
    """work/base as transformers saves it quantized by bitsandbytes (NF4,
    with double quantization or not), into work/name."""
    AutoModelForCausalLM.from_pretrained(
        work / "base", device_map="cpu", dtype=torch.float32,
        quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=double,
            bnb_4bit_compute_dtype=torch.float32)).save_pretrained(work / name)


def batch():
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator)
    labels = torch.full((BATCH, SEQ), -100)
    labels[:, :-1] = tokens[:, 1:]
    labels[0, 3] = -100
    return tokens, labels


def fp8_inputs(args):
    return " fp8_inputs: E4M3_BLOCKS" if args.fp8_inputs else ""


def compile_job(args, work, name, base, mesh=(1, 1)):
    """The quantized-base job `name` on `mesh`, its base from `base`,
    compiled; returns the program and how to launch it (mpirun, where
    there are several ranks) and the environment to launch it in."""
    job = work / f"{name}.textproto"
    modules = "".join(f' target_modules: "{t}"' for t in PROJECTIONS)
    job.write_text(
        f'checkpoint {{ base_dir: "{base}" }}\n'
        f"lora {{ rank: {RANK} alpha: {ALPHA}{modules} }}\n"
        f"quantization {{ base: {args.format.upper()}{fp8_inputs(args)} }}\n"
        f"train {{ batch_size: {BATCH} seq_len: {SEQ} }}\n"
        f"parallel {{ dp: {mesh[0]} tp: {mesh[1]} }}\n")
    program = work / f"{name}.twx"
    subprocess.run([args.bin / "twillc", job, "-o", program], check=True)
    ranks = (["mpirun", "--oversubscribe", "-np", str(mesh[0] * mesh[1])]
             if mesh != (1, 1) else [])
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return [*ranks, args.bin / "twill-train", program], env


def run_twill(args, work, name, base, mesh=(1, 1)):
    """Twill's logits, loss sum and gradients, its base from `base`."""
    launch, env = compile_job(args, work, name, base, mesh)
    common = [*launch, "--eval", "--batch", work / "batch.json", "--adapter",
              work / "adapter"]
    run = subprocess.run([*common, "--dump-logits", work / f"{name}.logits"],
                         check=True, capture_output=True, text=True, env=env)
    loss = float(re.search(r"sum (\S+) over", run.stdout).group(1))
    subprocess.run([*common, "--gradients", work / f"{name}.grads"],
                   check=True, capture_output=True, env=env)
    return (load_file(str(work / f"{name}.logits"))["logits"], loss,
            load_file(str(work / f"{name}.grads")))


def check_written_base(args, work, tokens):
    """Twill's quantization of the fp32 folder, written as a 4-bit folder,
    against bitsandbytes' (step 1); returns what does not hold."""
    subprocess.run([args.bin / "twill-train", work / "on-load.twx",
                    "--write-base", work / "twill-nf4"], check=True,
                   capture_output=True)
    ours = load_file(str(work / "twill-nf4" / "model.safetensors"))
    theirs = load_file(str(work / "nf4" / "model.safetensors"))
    failures = []
    if set(ours) != set(theirs):
        failures.append(f"tensors differ: {sorted(set(ours) ^ set(theirs))}")
        return failures
    suffix = ".quant_state.bitsandbytes__nf4"
    weights = [key.removesuffix(suffix) for key in ours if key.endswith(suffix)]
    parts = ["", ".absmax", ".nested_absmax", ".quant_map",
             ".nested_quant_map"]
    for weight in weights:
        offsets = [np.float32(json.loads(bytes(
            folder[weight + suffix].tolist()))["nested_offset"])
            for folder in (ours, theirs)]
        different = [part or ".weight" for part in parts if not torch.equal(
            ours[weight + part], theirs[weight + part])]
        if different or offsets[0].view(np.int32) != offsets[1].view(np.int32):
            failures.append(f"{weight}: not bitsandbytes': offset {offsets[0]!r}"
                            f" against {offsets[1]!r}, parts {different}")
    rest = [key for key in ours if not any(
        key == w or key.startswith(w + ".") for w in weights)]
    if not all(torch.equal(ours[key], theirs[key]) for key in rest):
        failures.append("a tensor not quantized differs")
    print(f"written base: {len(weights) - len(failures)} of {len(weights)} "
          f"weights' parts and offsets as bitsandbytes' to the bit, "
          f"{len(rest)} other tensors the same")
    logits = {}
    for folder in ("twill-nf4", "nf4"):
        loaded = AutoModelForCausalLM.from_pretrained(work / folder,
                                                      device_map="cpu")
        if not any(isinstance(m, Linear4bit) for m in loaded.modules()):
            failures.append(f"transformers loads {folder} unquantized")
        with torch.no_grad():
            logits[folder] = loaded(input_ids=tokens).logits
    error = relative_error(logits["twill-nf4"], logits["nf4"])
    print(f"written base: transformers' 4-bit model of it within {error:.2e} "
          f"of its model of bitsandbytes' folder")
    if error != 0:
        failures.append("transformers does not compute Twill's written base "
                        "as bitsandbytes' own")
    return failures


def check_sharded_quantization(args, work):
    """NF4 quantized on load on several ranks, each reading a share of
    every weight's rows for the scales and the rows its codes hold: written
    whole, the same folder, byte for byte, as one rank's; no rank reads
    the checkpoint whole. Returns what does not hold."""
    failures = []
    ours = load_file(str(work / "twill-nf4" / "model.safetensors"))
    whole = (work / "base" / "model.safetensors").stat().st_size
    for mesh in ((2, 2), (1, 3)):
        name = f"on-load-{mesh[0]}x{mesh[1]}"
        launch, env = compile_job(args, work, name, work / "base", mesh)
        run = subprocess.run([*launch, "--write-base", work / name],
                             check=True, capture_output=True, text=True,
                             env=env)
        theirs = load_file(str(work / name / "model.safetensors"))
        different = sorted(key for key in ours if key not in theirs
                           or not torch.equal(ours[key], theirs[key]))
        read = [int(count) for count in re.findall(
            r"rank \d+/\d+: read (\d+) bytes", run.stdout)]
        print(f"{name}: written base "
              f"{'NOT ' if different else ''}the same as 1x1's; ranks read "
              f"{sorted(read)} of the checkpoint's {whole} bytes")
        if different:
            failures.append(f"{name}: written base differs from 1x1's in "
                            f"{different[:3]}")
        # A share of the rows for the scales (1/world) and the rows the
        # codes hold (1/dp of them where tp splits the columns).
        bound = whole * (1 / (mesh[0] * mesh[1]) + 1 / mesh[0]) * 1.02
        if len(read) != mesh[0] * mesh[1] or max(read) > min(bound, whole):
            failures.append(f"{name}: ranks read {read} bytes, more than "
                            f"{bound:.0f} or the whole {whole}")
    return failures


def check_refusals(args, work):
    """Twill's errors for 4-bit folders it cannot read as a quantized base;
    returns what was not refused as expected."""
    save_four_bit(work, "nf4-single", double=False)
    shutil.copytree(work / "nf4", work / "nf4-partial")
    tensors = load_file(str(work / "nf4" / "model.safetensors"))
    missing = "model.layers.1.mlp.up_proj.weight.nested_absmax"
    del tensors[missing]
    save_file(tensors, str(work / "nf4-partial" / "model.safetensors"),
              metadata={"format": "pt"})
    failures = []
    for folder, message in (
            ("nf4-single", "4-bit weight 'model.layers.0.self_attn.q_proj."
                           "weight': its scales are not double-quantized"),
            ("nf4-partial", "its quant state 'model.layers.1.mlp.up_proj."
                            "weight.quant_state.bitsandbytes__nf4' has a "
                            "nested_offset (double quantization), but the "
                            f"checkpoint has no '{missing}'")):
        run = subprocess.run(
            [args.bin / "twill-train", work / "on-load.twx", "--eval",
             "--batch", work / "batch.json", "--adapter", work / "adapter",
             "--weights", work / folder], capture_output=True, text=True)
        refused = run.returncode != 0 and message in run.stderr
        print(f"{folder}: {'refused' if refused else 'NOT refused'}: "
              f"{run.stderr.strip().splitlines()[-1] if run.stderr else ''}")
        if not refused:
            failures.append(f"{folder} not refused with \"{message}\"")
    return failures


def check_merged(args, work, tokens, base):
    """Trains a few steps on 2x2 from `base` (the 4-bit folder, or the fp32
    one), writing the merged model; returns how far transformers' logits of
    it are from Twill's of the quantized base with the trained adapter."""
    data = work / "train.jsonl"
    data.write_text("".join(json.dumps({"input_ids": row}) + "\n"
                            for row in tokens.tolist() * 4))
    modules = "".join(f' target_modules: "{t}"' for t in PROJECTIONS)
    job = work / "merge.textproto"
    job.write_text(
        f'checkpoint {{ base_dir: "{base}" output_dir: '
        f'"{work / "out"}" merged: true }}\n'
        f"lora {{ rank: {RANK} alpha: {ALPHA}{modules} }}\n"
        f"quantization {{ base: {args.format.upper()} }}\n"
        f"train {{ batch_size: 2 seq_len: {SEQ} epochs: 1 lr: 0.01 }}\n"
        f"parallel {{ dp: 2 tp: 2 }}\n"
        f'data {{ path: "{data}" packed: false shuffle: false }}\n')
    subprocess.run([args.bin / "twillc", job, "-o", work / "merge.twx"],
                   check=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    subprocess.run(["mpirun", "--oversubscribe", "-np", "4",
                    args.bin / "twill-train", work / "merge.twx"],
                   check=True, capture_output=True, env=env)
    merged = AutoModelForCausalLM.from_pretrained(work / "out" / "merged")
    if "quantization_config" in merged.config.to_dict():
        return float("inf")
    with torch.no_grad():
        expected = merged.double()(input_ids=tokens).logits
    subprocess.run([args.bin / "twill-train", work / "on-load.twx", "--eval",
                    "--batch", work / "batch.json", "--adapter",
                    work / "out", "--weights", base,
                    "--dump-logits", work / "trained.logits"],
                   check=True, capture_output=True, env=env)
    return relative_error(load_file(str(work / "trained.logits"))["logits"],
                          expected)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--format", choices=["nf4", "fp8"], default="nf4")
    parser.add_argument("--fp8-inputs", action="store_true")
    args = parser.parse_args()
    if args.fp8_inputs and args.format != "fp8":
        parser.error("--fp8-inputs rounds the inputs of an FP8 base")
    nf4 = args.format == "nf4"
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    torch.manual_seed(0)
    wide = 2 if args.fp8_inputs else 1  # whole blocks of 128 to split
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128 * wide,
                         intermediate_size=192 * wide, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, rms_norm_eps=1e-5)
    model = LlamaForCausalLM(config).float().eval()
    model.save_pretrained(work / "base")
    if nf4:
        save_four_bit(work, "nf4", double=True)
    # Where the meshes and the merged model read the base from.
    read_from = work / ("nf4" if nf4 else "base")

    # The reference: the dequantized weights, PEFT's LoRA.
    model = get_peft_model(dequantize_projections(model, args.format),
                           LoraConfig(
                               r=RANK, lora_alpha=ALPHA,
                               target_modules=PROJECTIONS, lora_dropout=0.0,
                               init_lora_weights=False))
    model.save_pretrained(work / "adapter")
    model = model.double().eval()
    tokens, labels = batch()
    if args.fp8_inputs:
        with torch.no_grad():
            unrounded = model(input_ids=tokens).logits
        round_base_inputs(model)
    (work / "batch.json").write_text(json.dumps({
        "tokens": tokens.tolist(), "labels": labels.tolist(),
        "positions": torch.arange(SEQ).repeat(BATCH, 1).tolist(),
        "segments": torch.zeros(BATCH, SEQ, dtype=torch.long).tolist()}))
    logits = model(input_ids=tokens).logits
    counted = labels != -100
    loss = torch.nn.functional.cross_entropy(logits[counted], labels[counted],
                                             reduction="sum")
    trainable = trainable_parameters(model, lora=True)
    model.zero_grad()
    loss.backward()
    expected_grads = {name: p.grad for name, p in trainable.items()}

    failures = []
    on_load, on_load_loss, on_load_grads = run_twill(args, work, "on-load",
                                                     work / "base")
    if nf4:
        read, _, _ = run_twill(args, work, "read", work / "nf4")
        error = relative_error(read, on_load)
        print(f"quantized on load vs read from the 4-bit folder: logits "
              f"within {error:.2e}")
        if error != 0:
            failures.append("quantizing on load is not bitsandbytes'")

    error = relative_error(on_load, logits.detach())
    loss_error = abs(on_load_loss - loss.item()) / loss.item()
    grads = gradients_by_parameter(expected_grads, on_load_grads)
    worst = max((norm_error(on_load_grads[name + ".grad"], grad), name)
                for name, grad in grads.items())
    print(f"against the {args.format} reference + PEFT: logits within "
          f"{error:.2e}, loss sum "
          f"{on_load_loss:.6f} vs {loss.item():.6f} ({loss_error:.2e}), "
          f"{len(grads)} gradients, worst {worst[0]:.2e} ({worst[1]})")
    close = error < 1e-5
    if args.fp8_inputs:
        close, error, beyond = close_but_for_flips(on_load, logits.detach())
        apart = relative_error(on_load, unrounded)
        print(f"fp8_inputs: {beyond} of {BATCH * SEQ} positions' logits "
              f"beyond 1e-5 of the reference (worst {error:.2e}); its "
              f"rounding moves them by {apart:.2e}, {apart / error:.0f} "
              f"times Twill's distance from it")
        if not apart > 10 * error:
            failures.append("Twill's products do not round as the "
                            "reference's")
    tolerance = 1e-2 if args.fp8_inputs else 1e-5  # the gradients'
    if not (close and loss_error < (1e-4 if args.fp8_inputs else 1e-5)
            and worst[0] < tolerance
            and len(grads) == 2 * len(PROJECTIONS) * 2
            and len(on_load_grads) == len(grads)):
        failures.append(f"Twill's {args.format} base is not the reference's")

    for mesh in MESHES:
        name = f"mesh{mesh[0]}x{mesh[1]}"
        meshed, _, meshed_grads = run_twill(args, work, name, read_from, mesh)
        error = relative_error(meshed, on_load)
        close = error < 1e-5
        if args.fp8_inputs:
            close, error, beyond = close_but_for_flips(meshed, on_load)
            print(f"{name}: {beyond} positions' logits beyond 1e-5")
        worst = max(norm_error(meshed_grads[key], grad)
                    for key, grad in on_load_grads.items())
        print(f"{name}: logits within {error:.2e}, gradients within "
              f"{worst:.2e} of 1x1")
        if not (close and worst < tolerance):
            failures.append(f"{name} is not 1x1")
    if nf4:
        failures += check_written_base(args, work, tokens)
        failures += check_sharded_quantization(args, work)
        failures += check_refusals(args, work)
    if not args.fp8_inputs:
        merged_error = check_merged(args, work, tokens, read_from)
        print(f"merged from {read_from.name}: transformers' logits within "
              f"{merged_error:.2e} of Twill's")
        if not merged_error < 1e-5:
            failures.append("the merged model is not the base plus the "
                            "adapter")
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
