"""The device check: everything a GPU window must find and measure, in order.

    python3 bench/device_check.py --bin BIN --programs DIR --out OUT

BIN holds twill-train and twill-conformance built with CUDA; DIR the
programs of bench/compile_gpu_programs.sh (compiled where twillc is; they
write under /tmp/twill-gpu). Each part runs whatever happened before it,
under its own time limit, and writes what it printed to OUT:

1. conformance.txt   twill-conformance --backend=cuda: every instruction
                     kind against the cpu backend;
2. cuda_vs_cpu.txt   test/gpu/cuda_vs_cpu.py: train steps and 20-step runs,
                     cuda against cpu;
3. the bf16 GEMM peak of this GPU (8192^3 through PyTorch's cuBLAS, random
   data, median of 20), the ceiling MFU is measured against;
4. llama8b-4096.txt  the Llama-3.1-8B-shape LoRA step (bf16, rank 16 on all
                     projections, seq 4096, batch 1, one GPU) for 4 steps
                     with --profile: tokens/s of steps 2-4, MFU, device
                     memory against the memory plan, the profile summary,
                     the step time against the one twillc's cost estimate
                     predicts at clusters/h200.textproto (issue 19:
                     llama8b-4096.report.txt, written where it compiled);
                     its trace as llama8b-4096.trace.json.gz;
5. llama8b-16384.txt the same at seq 16384;
6. llama8b-long-32768.txt  the long-context transformations on the GPU
                     (issue 17): seq 32768 with FULL checkpointing, every
                     layer's input offloaded to pinned host memory (copies on
                     a stream of their own), the MLP and attention
                     projections in tiles of 8192 and the tiled loss; its
                     device memory against the plan as above;
7. llama8b-dropout-4096.txt  step 4's with LoRA dropout 0.1 on every
                     projection (issue 20): its cost is the difference;
8. results.md        a table of every figure, printed last; the whole log is
                     device_check.log.

MFU counts the FLOPs the step needs per token: 4N for the matmuls with
frozen weights (forward, and the input gradient; N = the decoder's and
lm_head's weights), 6 L d T for causal attention forward and backward
(half of PaLM's 12 L d T, which counts the masked half), and 6 r (d_in +
d_out) per LoRA adapter (forward, input and weight gradients).
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Llama-3.1-8B: layers, hidden, MLP, KV width, vocab; LoRA rank 16 on all.
L, D, FFN, KV, VOCAB, RANK = 32, 4096, 14336, 1024, 128256, 16
DATASHEET_PEAK = 989e12  # H100/H200 SXM dense bf16
GOAL = 8000  # tokens/s, issue 12's first figure


def flops_per_token(seq):
    matmul_weights = L * (2 * D * D + 2 * D * KV + 3 * D * FFN) + D * VOCAB
    adapters = L * sum(d_in + d_out for d_in, d_out in [
        (D, D), (D, KV), (D, KV), (D, D), (D, FFN), (D, FFN), (FFN, D)])
    return 4 * matmul_weights + 6 * L * D * seq + 6 * RANK * adapters


class Check:
    def __init__(self, out):
        self.out = out
        self.rows = []  # (what, figure) for results.md
        self.log = open(out / "device_check.log", "a")

    def say(self, text):
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def run(self, name, command, limit, output=None, env=None):
        """Runs one part under `limit` seconds; its output goes to OUT/output
        (and the log). Returns (exit code or None on timeout, text)."""
        self.say(f"=== {name}: {' '.join(str(c) for c in command)}")
        began = time.time()
        try:
            result = subprocess.run([str(c) for c in command], env=env,
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    timeout=limit)
            code, text = result.returncode, result.stdout
        except subprocess.TimeoutExpired as expired:
            code = None
            text = (expired.stdout or b"")
            text = text.decode(errors="replace") if isinstance(text, bytes) else text
            text += f"\n(stopped after its limit of {limit} s)\n"
        except OSError as error:  # no such program
            code, text = None, f"cannot run it: {error}\n"
        seconds = time.time() - began
        if output:
            (self.out / output).write_text(text)
        self.log.write(text)
        self.say(f"=== {name}: exit {code} in {seconds:.0f} s")
        return code, text

    def row(self, what, figure):
        self.rows.append((what, figure))
        self.say(f"{what}: {figure}")


def conformance(check, args):
    code, text = check.run("conformance",
                           [args.bin / "twill-conformance", "--backend=cuda"],
                           75, "conformance.txt")
    total = re.search(r"^conformance: .*$", text, re.MULTILINE)
    failed = [line for line in text.splitlines() if line.endswith(" FAIL")]
    check.row("conformance (twill-conformance --backend=cuda)",
              (total.group(0) if total else
               "SKIPPED: no GPU or no CUDA" if code == 77 else
               f"no total (exit {code})") +
              (f"; failed: {'; '.join(failed[:12])}" if failed else ""))


def cuda_vs_cpu(check, args):
    code, text = check.run(
        "cuda_vs_cpu",
        [sys.executable, args.tests / "cuda_vs_cpu.py", "--bin", args.bin,
         "--work", args.programs / "gpu", "--data", args.data, "--precompiled"],
        100, "cuda_vs_cpu.txt")
    lines = [line for line in text.splitlines() if line.strip()]
    check.row("gpu.cuda_vs_cpu", ("passed" if code == 0 else
                                  f"FAILED (exit {code})") +
              ": " + " / ".join(lines[-6:]))


def gemm_peak(check):
    code, text = check.run("bf16 GEMM peak", [sys.executable, "-c", """
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
times = []
for _ in range(20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); a @ b; end.record(); end.synchronize()
    times.append(start.elapsed_time(end) / 1e3)
times.sort()
print(f"peak {2 * 8192**3 / times[len(times) // 2]:.6e}")
print(torch.cuda.get_device_name(), torch.version.cuda)
"""], 45)
    found = re.search(r"^peak (\S+)", text, re.MULTILINE)
    peak = float(found.group(1)) if found else None
    check.row("bf16 GEMM peak measured (8192^3, PyTorch cuBLAS, median of 20)",
              f"{peak / 1e12:.0f} TFLOP/s" if peak else
              f"not measured (exit {code}); MFU against the datasheet only")
    return peak


def llama_step(check, args, seq, peak, program=None, what=None, limit=None):
    """Runs bench/compile_gpu_programs.sh's `program` (llama8b-SEQ) on rows
    of `seq` random tokens; `what` names it in the table."""
    program = program or f"llama8b-{seq}"
    work = Path("/tmp/twill-gpu")
    data = work / f"data-{seq}.jsonl"
    import random
    rng = random.Random(seq)
    with open(data, "w") as f:
        for _ in range(4):
            ids = [rng.randrange(128000) for _ in range(seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    trace = work / f"{program}.trace.json"
    try:  # the GPU's memory in use, every 200 ms, whoever holds it
        sampler = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used",
             "--format=csv,noheader,nounits", "-lms", "200"],
            stdout=subprocess.PIPE, text=True)
    except OSError:
        sampler = None
    name = what or f"seq {seq}"
    code, text = check.run(
        f"Llama-3.1-8B LoRA step, {name}",
        [args.bin / "twill-train", args.programs / f"{program}.twx",
         "--backend=cuda", "--data", data, f"--profile={trace}"],
        limit or (120 if seq <= 4096 else 150), f"{program}.txt")
    sampled = []
    if sampler:
        sampler.terminate()
        sampled = [int(x) for x in sampler.communicate()[0].split()
                   if x.isdigit()]
    metrics = work / f"{program}-out" / "metrics.jsonl"
    steps = ([json.loads(line) for line in metrics.read_text().splitlines()]
             if metrics.exists() and code == 0 else [])
    if len(steps) < 2:
        tail = " / ".join(text.strip().splitlines()[-4:])
        check.row(f"8B LoRA step, {name}", f"FAILED (exit {code}): {tail}")
        return
    tokens_per_second = statistics.median(s["tokens_per_second"]
                                          for s in steps[1:])
    achieved = tokens_per_second * flops_per_token(seq)
    check.row(f"8B LoRA step, {name}: tokens/s (median of steps 2-{len(steps)}"
              ", profiled)", f"{tokens_per_second:,.0f} (goal {GOAL:,})")
    check.row(f"8B LoRA step, {name}: model FLOPs per token",
              f"{flops_per_token(seq):.3e}")
    check.row(f"8B LoRA step, {name}: MFU",
              (f"{achieved / peak:.1%} of the measured peak, " if peak else "") +
              f"{achieved / DATASHEET_PEAK:.1%} of 989 TFLOP/s")
    report = args.programs / f"{program}.report.txt"
    predicted = re.search(r"^  step ([\d.]+) ms", report.read_text(),
                          re.MULTILINE) if report.exists() else None
    measured = statistics.median(b["elapsed_seconds"] - a["elapsed_seconds"]
                                 for a, b in zip(steps[1:], steps[2:])) \
        if len(steps) > 2 else seq / tokens_per_second
    check.row(f"8B LoRA step, {name}: step time, twillc's prediction at "
              "clusters/h200.textproto against measured (profiled)",
              (f"predicted {float(predicted.group(1)) / 1e3:.3f} s, measured "
               f"{measured:.3f} s: {float(predicted.group(1)) / 1e3 / measured:.2f}"
               if predicted else f"no prediction; measured {measured:.3f} s"))
    planned = re.search(r"the program needs (\S+) MiB", text)
    device = re.search(r"^cuda: device memory in use at most (\S+) GiB.*"
                       r"allocations at most (\S+) GiB: (\S+) GiB", text,
                       re.MULTILINE)
    check.row(f"8B LoRA step, {name}: memory",
              (f"plan {float(planned.group(1)) / 1024:.2f} GiB; "
               if planned else "plan not printed; ") +
              (f"Twill allocated at most {device.group(2)} GiB "
               f"({device.group(3)} GiB buffers); cudaMemGetInfo peak "
               f"{device.group(1)} GiB; " if device else "") +
              (f"nvidia-smi peak {max(sampled) / 1024:.2f} GiB"
               if sampled else "nvidia-smi not sampled"))
    summary = text[text.find("profile: "):] if "profile: " in text else ""
    kinds = re.findall(r"^  (\w+)\s+\d+\s+\S+\s+(\S+)%\s+(.*)$", summary,
                       re.MULTILINE)
    check.row(f"8B LoRA step, {name}: profile (top op kinds)",
              "; ".join(f"{k} {share}% {rate}" for k, share, rate in kinds[:6])
              or "no profile summary")
    if trace.exists() and seq <= 4096:
        with open(trace, "rb") as source, \
                gzip.open(check.out / f"{program}.trace.json.gz", "wb") as target:
            target.write(source.read())


def main():
    parser = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--programs", type=Path, default=Path("/tmp/twill-gpu"))
    parser.add_argument("--tests", type=Path, default=here.parent / "test" / "gpu")
    parser.add_argument("--data", type=Path,
                        default=here.parent / "data" / "recall" / "train.jsonl")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.bin = args.bin.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    check = Check(args.out)
    began = time.time()
    check.run("gpu", ["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                      "--format=csv"], 20)
    for part in (conformance, cuda_vs_cpu):
        try:
            part(check, args)
        except Exception as error:  # one part's failure must not stop the next
            check.row(part.__name__, f"FAILED: {error!r}")
    peak = None
    try:
        peak = gemm_peak(check)
    except Exception as error:
        check.row("bf16 GEMM peak", f"FAILED: {error!r}")
    steps = [(4096, {}), (16384, {}),
             (32768, dict(program="llama8b-long-32768", limit=180,
                          what="seq 32768, FULL + offload + tiles")),
             (4096, dict(program="llama8b-dropout-4096",
                         what="seq 4096, LoRA dropout 0.1"))]
    for seq, options in steps:
        try:
            llama_step(check, args, seq, peak, **options)
        except Exception as error:
            check.row(f"8B LoRA step, {options.get('what', f'seq {seq}')}",
                      f"FAILED: {error!r}")
    check.row("device check wall time", f"{time.time() - began:.0f} s")
    table = "| what | measured |\n|---|---|\n" + "\n".join(
        f"| {what} | {figure} |" for what, figure in check.rows)
    (args.out / "results.md").write_text(table + "\n")
    check.say("\n" + table)


if __name__ == "__main__":
    main()
