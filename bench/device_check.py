"""The device check: everything a GPU window must find and measure, in order
of value, under one deadline.

    python3 bench/device_check.py --bin BIN --out OUT [--programs DIR]
        [--deadline SECONDS] [--work DIR] [--parts NAME,...]

BIN holds twill-train and twill-conformance built with CUDA; DIR the
programs of bench/compile_gpu_programs.sh (compiled where twillc is; they
write under /tmp/twill-gpu). Each part runs whatever happened before it, in
a process group of its own (killed whole at its limit), under its own limit
and never past the deadline (default 540 s: a 600 s command with time to
spare). What a part prints streams to OUT/device_check.log as it comes, and
OUT/results.md is rewritten after every part, so a run cut short still
returns what it found. At the end OUT holds four files, the most a device
call brings back being eight:

    results.md         a table of every figure and verdict;
    device_check.log   everything every part printed;
    logs.tar.gz        each part's output in a file of its own;
    traces.tar.gz      the profiles' Chrome traces (what fits in 15 MiB).

The parts, most valuable first:

1. the cuda conformance (twill-conformance --backend=cuda, every instruction
   kind against the cpu backend) with CUDA_LAUNCH_BLOCKING=1, so a kernel's
   fault fails its own case; a fault that ends the GPU's context stops the
   harness, which goes on from the next case in a new process; each failed
   case is then run again alone, to tell its own failures from another's;
2. two NCCL ranks on the one GPU (NCCL 2.30's NCCL_MULTI_RANK_GPU_ENABLE,
   launched over TCP: the bundle has no MPI): the tiny job on 2x1 and
   1x2, its losses against the same programs' on the cpu backend (1e-5);
3. gpu.cuda_vs_cpu (test/gpu/cuda_vs_cpu.py): train steps and 20-step runs,
   cuda against cpu;
4. the bf16 GEMM peak of this GPU (8192^3 through PyTorch's cuBLAS, random
   data, median of 20), the ceiling MFU is measured against;
5. the Llama-3.1-8B-shape LoRA step (bf16, rank 16 on all projections, seq
   4096, batch 1, one GPU) for 4 steps with --profile: tokens/s of steps
   2-4, MFU, device memory against the memory plan, the profile summary,
   the step against the one twillc's cost estimate predicts at
   clusters/h200.textproto (NAME.report.txt, written where it compiled);
   then the same with attention as the chunked kernel
   (TWILL_CUDA_ATTENTION=chunked: cuDNN's fused attention's baseline), with
   LoRA dropout 0.1 (its cost is the difference), and at seq 16384;
6. seq 32768 with every long-context transformation (FULL checkpointing,
   offload to pinned host memory, tiled MLP and projections, tiled loss),
   its device memory against the plan;
7. compute-sanitizer over the conformance cases: memcheck on every case,
   racecheck on those whose kernels share memory within a block.

--parts runs some of them (conformance, nccl, cuda_vs_cpu, peak, steps,
long, sanitizer), as a second run in a window does after a fix.

The check itself writes nothing but those four files in OUT (it refuses an
OUT that holds one already) and, in a folder it makes new under --work
(default /tmp/twill-check), each part's output, the steps' data and their
memory samples and traces; it deletes nothing. A flag it cannot use (a
deadline that is not a finite number of seconds past the time kept to
pack, an OUT or --work that is not a folder it can write, a --bin without
the programs the parts run, a --programs that is not a folder, an unknown
part) is refused before anything runs: one line, exit 2.

A part that finds no GPU (no device, no driver, no CUDA build, no PyTorch
with CUDA) says SKIPPED, never passed or failed.

MFU counts the FLOPs the step needs per token: 4N for the matmuls with
frozen weights (forward, and the input gradient; N = the decoder's and
lm_head's weights), 6 L d T for causal attention forward and backward
(half of PaLM's 12 L d T, which counts the masked half), and 6 r (d_in +
d_out) per LoRA adapter (forward, input and weight gradients).
"""
import argparse
import gzip
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

# Llama-3.1-8B: layers, hidden, MLP, KV width, vocab; LoRA rank 16 on all.
L, D, FFN, KV, VOCAB, RANK = 32, 4096, 14336, 1024, 128256, 16
DATASHEET_PEAK = 989e12  # H100/H200 SXM dense bf16
GOAL = 8000  # tokens/s, issue 12's first figure
FILE_LIMIT = 15 << 20  # each file that comes back: under the 16 MiB limit
RESERVE = 8  # seconds kept after the last part, to write and pack
SKIP = 77
PARTS = ["conformance", "nccl", "cuda_vs_cpu", "peak", "steps", "long",
         "sanitizer"]
# What the check writes in OUT (results.md.partial: while rewriting it).
OUTPUTS = ["results.md", "results.md.partial", "device_check.log",
           "logs.tar.gz", "traces.tar.gz"]
# The programs of --bin, each with the parts that run it, and the parts
# that run the programs of --programs.
RUNS = {"twill-conformance": {"conformance", "sanitizer"},
        "twill-train": {"nccl", "cuda_vs_cpu", "steps", "long"}}
COMPILED = {"nccl", "cuda_vs_cpu", "steps", "long"}
# Ops whose cuda kernels share memory within a block (blockSum, blockMax).
SHARED_MEMORY_OPS = "attention,cross_entropy,norm,sum_squares"


def flops_per_token(seq):
    matmul_weights = L * (2 * D * D + 2 * D * KV + 3 * D * FFN) + D * VOCAB
    adapters = L * sum(d_in + d_out for d_in, d_out in [
        (D, D), (D, KV), (D, KV), (D, D), (D, FFN), (D, FFN), (FFN, D)])
    return 4 * matmul_weights + 6 * L * D * seq + 6 * RANK * adapters


NOT_RUN = "not run: the deadline had come\n"


def not_run(code, text):
    """Why a part did not run (no GPU, or no time left), or None."""
    if text == NOT_RUN:
        return "NOT RUN: the deadline had come"
    for phrase in ("needs a GPU", "built without CUDA", "no NVIDIA driver",
                   "no PyTorch", "no GPU"):
        if phrase in text:
            line = next(line for line in text.splitlines() if phrase in line)
            return "SKIPPED: " + line.strip().removeprefix("SKIPPED: ")[:200]
    return "SKIPPED: no GPU" if code == SKIP else None


class Check:
    def __init__(self, out, work, deadline):
        self.out, self.work = out, work
        self.began = time.monotonic()
        self.deadline = self.began + deadline
        self.rows = []  # (what, figure) for results.md
        self.log = open(out / "device_check.log", "x")
        self.logged = 0
        self.group = None  # the running part's process group
        self.lock = threading.Lock()

    def left(self):
        return self.deadline - time.monotonic()

    def say(self, text):
        print(text, flush=True)
        self.write_log(text + "\n")

    def write_log(self, text):
        with self.lock:
            if self.logged + len(text) > FILE_LIMIT:
                return
            self.logged += len(text)
            self.log.write(text)
            self.log.flush()

    def run(self, name, command, limit, output=None, env=None):
        """Runs one part, in a process group of its own, for at most `limit`
        seconds and never past the deadline; what it prints streams to the
        log and to WORK/output. Returns (exit code, or None where it did not
        end by itself, and its text)."""
        limit = min(limit, self.left() - RESERVE)
        if limit < 1:
            self.say(f"=== {name}: {NOT_RUN.strip()}")
            return None, NOT_RUN
        self.say(f"=== {name} (at most {limit:.0f} s): "
                 f"{' '.join(str(c) for c in command)}")
        began = time.monotonic()
        lines = []
        target = open(self.work / output, "w") if output else None
        try:
            process = subprocess.Popen(
                [str(c) for c in command], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        except OSError as error:  # no such program
            text = f"cannot run it: {error}\n"
            self.write_log(text)
            if target:
                target.write(text)
                target.close()
            return None, text
        self.group = process.pid

        def stream():
            for raw in process.stdout:
                line = raw.decode(errors="replace")
                lines.append(line)
                self.write_log(line)
                if target:
                    target.write(line)
                    target.flush()
        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            code = None
        # Whatever the part left behind (a twill-train under a Python
        # script, a sampler) ends with it.
        self.kill_group()
        if code is None:
            process.wait()
        reader.join(timeout=5)
        if code is None:
            stopped = f"(stopped after its limit of {limit:.0f} s)\n"
            lines.append(stopped)
            self.write_log(stopped)
            if target:
                target.write(stopped)
        if target:
            target.close()
        self.say(f"=== {name}: exit {code} in {time.monotonic() - began:.0f} s")
        return code, "".join(lines)

    def kill_group(self):
        if self.group is None:
            return
        for sent in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.group, sent)
            except ProcessLookupError:
                break
            if sent == signal.SIGTERM:
                time.sleep(0.5)
        self.group = None

    def row(self, what, figure):
        self.rows.append((what, figure))
        self.say(f"{what}: {figure}")
        self.write_results()

    def write_results(self, ended=False):
        table = "| what | measured |\n|---|---|\n" + "\n".join(
            f"| {what} | {figure.replace('|', '/')} |"
            for what, figure in self.rows)
        state = ("ended" if ended else "still running (a part was cut off "
                 "here if nothing follows)")
        text = (f"# Device check\n\n{table}\n\nWall time "
                f"{time.monotonic() - self.began:.0f} s; the check "
                f"{state}.\n")
        temporary = self.out / "results.md.partial"
        temporary.write_text(text)
        temporary.replace(self.out / "results.md")

    def pack(self):
        """Each part's output into logs.tar.gz, the traces into
        traces.tar.gz, each under the size that comes back."""
        logs = sorted(self.work.glob("*.txt"))
        traces = sorted(self.work.glob("*.trace.json.gz"),
                        key=lambda path: path.stat().st_size)
        for name, files in (("logs.tar.gz", logs), ("traces.tar.gz", traces)):
            while files:
                with tarfile.open(self.out / name, "w:gz") as archive:
                    for path in files:
                        archive.add(path, arcname=path.name)
                if (self.out / name).stat().st_size <= FILE_LIMIT:
                    break
                dropped = files.pop()  # the largest
                self.say(f"{name}: {dropped.name} left out (too large)")


def conformance(check, args):
    """The conformance, from its first case, going on in a new process after
    a case that ends the GPU's context; then each failed case alone."""
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    command = [args.bin / "twill-conformance", "--backend=cuda"]
    what = "conformance (twill-conformance --backend=cuda, CUDA_LAUNCH_BLOCKING=1)"
    first, failed, totals, stops = 0, [], [], []
    while True:
        code, text = check.run(f"conformance from case {first}",
                               command + [f"--first={first}"], 90,
                               f"conformance-{first}.txt", env)
        if not_run(code, text):
            if not totals:
                check.row(what, not_run(code, text))
                return
            break
        failed += re.findall(r"^\[(\d+)\] (.*) FAIL$", text, re.MULTILINE)
        totals += re.findall(r"^conformance: \d+ of .*$", text, re.MULTILINE)
        stop = re.search(r"^conformance: .* --first=(\d+)$", text,
                         re.MULTILINE)
        if not stop or code is None:
            break
        stops.append(stop.group(0))
        first = int(stop.group(1))
    ended = code is not None and not not_run(code, text)
    check.row(what,
              (" + ".join(totals) or f"no total (exit {code})") +
              (f"; the GPU's context was lost {len(stops)} time(s): "
               f"{' / '.join(stops)}" if stops else "") +
              ("" if ended else "; cut off before the last case") +
              (f"; failed: {'; '.join(f'[{n}] {line}' for n, line in failed[:12])}"
               if failed else ""))
    alone = []
    for number, line in failed[:12]:
        code, text = check.run(f"conformance case {number} alone",
                               command + [f"--case={number}"], 30,
                               f"conformance-case-{number}.txt", env)
        verdict = ("fails alone" if code == 1 else
                   "passes alone (another case's failure)" if code == 0 else
                   f"exit {code}")
        alone.append(f"[{number}] {verdict}")
    if alone:
        check.row("conformance: each failed case run again alone",
                  "; ".join(alone))


# Starts `ranks` ranks of a command with torchrun's variables (Twill's TCP
# launch) and exits with the worst exit code.
RANKS = """
import os, socket, subprocess, sys
ranks, command = int(sys.argv[1]), sys.argv[2:]
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
processes = [subprocess.Popen(command, env=dict(
    os.environ, RANK=str(rank), WORLD_SIZE=str(ranks),
    MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))) for rank in range(ranks)]
sys.exit(max(process.wait() for process in processes))
"""
NCCL_TOLERANCE = 1e-5  # fp32: the cuda and cpu kernels' rounding


def nccl_one_gpu(check, args):
    """The tiny job on 2x1 and 1x2, both ranks on the one GPU, against the
    same mesh on the cpu backend (bench/compile_gpu_programs.sh's nccl-*
    programs)."""
    # NCCL names its version at NCCL_DEBUG=WARN (run.sh's) or VERSION.
    env = dict(os.environ, NCCL_MULTI_RANK_GPU_ENABLE="1", OMP_NUM_THREADS="1")
    for mesh in ("2x1", "1x2"):
        what = f"NCCL: the tiny job on {mesh}, two ranks on one GPU, against the cpu"
        losses, nccl = {}, None
        for backend in ("cuda", "cpu"):
            name = f"nccl-{mesh}-{backend}"
            code, text = check.run(
                f"tiny job {mesh} on {backend}",
                [sys.executable, "-c", RANKS, "2", args.bin / "twill-train",
                 args.programs / f"{name}.twx", f"--backend={backend}",
                 "--data", args.data], 90, f"{name}.txt", env)
            metrics = args.programs / f"{name}-out" / "metrics.jsonl"
            if code != 0 or not metrics.exists():
                tail = " / ".join(text.strip().splitlines()[-3:])
                losses = None
                check.row(what, not_run(code, text) or
                          f"FAILED on {backend} (exit {code}): {tail[-400:]}")
                break
            losses[backend] = [json.loads(line)["loss"]
                               for line in metrics.read_text().splitlines()]
            nccl = re.search(r"NCCL version (\S+)", text) or nccl
        if losses is None:
            continue
        cuda, cpu = losses["cuda"], losses["cpu"]
        worst = max((abs(a - b) / abs(b) for a, b in zip(cuda, cpu)),
                    default=math.inf)
        check.row(what, ("passed" if len(cuda) == len(cpu) and
                         worst <= NCCL_TOLERANCE else "FAILED") +
                  f": {len(cuda)} losses within {worst:.1e} relative "
                  f"(tolerance {NCCL_TOLERANCE:.0e}); cuda {cuda[-1]:.6f}, "
                  f"cpu {cpu[-1]:.6f} at the last step; NCCL "
                  f"{nccl.group(1) if nccl else '(its version unsaid)'}")


def cuda_vs_cpu(check, args):
    code, text = check.run(
        "cuda_vs_cpu",
        [sys.executable, args.tests / "cuda_vs_cpu.py", "--bin", args.bin,
         "--work", args.programs / "gpu", "--data", args.data, "--precompiled"],
        120, "cuda_vs_cpu.txt")
    lines = [line for line in text.splitlines() if line.strip()]
    skipped = not_run(code, text)
    check.row("gpu.cuda_vs_cpu", skipped or
              ("passed" if code == 0 else f"FAILED (exit {code})") + ": " +
              " / ".join(lines[-12:]))


GEMM_PEAK = """
import sys
try:
    import torch
except ImportError as error:
    print(f"no PyTorch: {error}")
    sys.exit(77)
if not torch.cuda.is_available():
    print("no GPU: torch.cuda.is_available() is false")
    sys.exit(77)
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
"""


def without_bundled_nccl():
    """The environment without the NCCL the bundle brings (run.sh puts it
    first on the library path, for Twill's ranks): PyTorch loads its own."""
    env = dict(os.environ)
    bundled = env.pop("TWILL_BUNDLED_NCCL", None)
    if bundled:
        env["LD_LIBRARY_PATH"] = ":".join(
            folder for folder in env.get("LD_LIBRARY_PATH", "").split(":")
            if folder != bundled)
    return env


def gemm_peak(check):
    code, text = check.run("bf16 GEMM peak", [sys.executable, "-c", GEMM_PEAK],
                           60, "gemm_peak.txt", without_bundled_nccl())
    found = re.search(r"^peak (\S+)", text, re.MULTILINE)
    peak = float(found.group(1)) if found else None
    skipped = None if peak else not_run(code, text)
    what = "bf16 GEMM peak measured (8192^3, PyTorch cuBLAS, median of 20)"
    check.row(what, f"{peak / 1e12:.0f} TFLOP/s" if peak else skipped or
              f"not measured (exit {code}); MFU against the datasheet only")
    return peak


def llama_step(check, args, seq, peak, program, what, limit, env=None):
    """Runs bench/compile_gpu_programs.sh's `program` on rows of `seq`
    random tokens, with `env` added to the environment; `what` names it in
    the table. Returns its tokens/s, or None."""
    data = check.work / f"data-{seq}.jsonl"
    rng = random.Random(seq)
    with open(data, "w") as f:
        for _ in range(4):
            ids = [rng.randrange(128000) for _ in range(seq)]
            f.write(json.dumps({"input_ids": ids}) + "\n")
    trace = check.work / f"{program}.trace.json"
    memory = check.work / f"{program}.memory"
    # The GPU's memory in use, every 200 ms, whoever holds it: a line at a
    # time (stdbuf), so that what it sampled is in the file when the part's
    # end kills it. The file is the script's first argument, never pasted
    # into it: --work may name any path.
    sampler = ("memory=$1; shift; stdbuf -oL nvidia-smi --query-gpu="
               "memory.used --format=csv,noheader,nounits -lms 200 "
               "> \"$memory\" 2>/dev/null & exec \"$@\"")
    code, text = check.run(
        f"Llama-3.1-8B LoRA step, {what}",
        ["sh", "-c", sampler, "sh", memory, args.bin / "twill-train",
         args.programs / f"{program}.twx", "--backend=cuda", "--data", data,
         f"--profile={trace}"], limit, f"{program}.txt",
        dict(os.environ, **(env or {})))
    sampled = ([int(x) for x in memory.read_text().split() if x.isdigit()]
               if memory.exists() else [])
    metrics = args.programs / f"{program}-out" / "metrics.jsonl"
    # The steps' figures even where the run failed or was stopped after
    # them (at its end), with the failure said beside them.
    steps = ([json.loads(line) for line in metrics.read_text().splitlines()]
             if metrics.exists() else [])
    name = f"8B LoRA step, {what}"
    tail = " / ".join(text.strip().splitlines()[-4:])
    if code != 0:
        check.row(name, not_run(code, text) or f"FAILED (exit {code}): {tail}")
    if len(steps) < 2:
        return None
    tokens_per_second = statistics.median(s["tokens_per_second"]
                                          for s in steps[1:])
    achieved = tokens_per_second * flops_per_token(seq)
    check.row(f"{name}: tokens/s (median of steps 2-{len(steps)}, profiled)",
              f"{tokens_per_second:,.0f} (goal {GOAL:,})")
    check.row(f"{name}: model FLOPs per token", f"{flops_per_token(seq):.3e}")
    check.row(f"{name}: MFU",
              (f"{achieved / peak:.1%} of the measured peak, " if peak else "") +
              f"{achieved / DATASHEET_PEAK:.1%} of 989 TFLOP/s")
    report = args.programs / f"{program}.report.txt"
    predicted = re.search(r"^  step ([\d.]+) ms", report.read_text(),
                          re.MULTILINE) if report.exists() else None
    measured = statistics.median(b["elapsed_seconds"] - a["elapsed_seconds"]
                                 for a, b in zip(steps[1:], steps[2:])) \
        if len(steps) > 2 else seq / tokens_per_second
    check.row(f"{name}: step time, twillc's prediction at "
              "clusters/h200.textproto against measured (profiled)",
              (f"predicted {float(predicted.group(1)):.4g} ms, measured "
               f"{measured * 1e3:.4g} ms: "
               f"{float(predicted.group(1)) / 1e3 / measured:.3g} of it"
               if predicted else
               f"no prediction; measured {measured * 1e3:.4g} ms"))
    planned = re.search(r"the program needs (\S+) MiB", text)
    device = re.search(r"^cuda: device memory in use at most (\S+) GiB.*"
                       r"allocations at most (\S+) GiB: (\S+) GiB", text,
                       re.MULTILINE)
    check.row(f"{name}: memory",
              (f"plan {float(planned.group(1)) / 1024:.2f} GiB; "
               if planned else "plan not printed; ") +
              (f"Twill allocated at most {device.group(2)} GiB "
               f"({device.group(3)} GiB buffers); cudaMemGetInfo peak "
               f"{device.group(1)} GiB; " if device else "") +
              (f"nvidia-smi peak {max(sampled) / 1024:.2f} GiB"
               if sampled else "nvidia-smi not sampled"))
    if (env or {}).get("TWILL_CUDA_ATTENTION") != "chunked":
        # twill-train names each shape cuDNN's fused attention did not take.
        chunked = re.findall(r"^twill: (attention.*runs the chunked kernel: "
                             r".*)$", text, re.MULTILINE)
        check.row(f"{name}: attention",
                  "; ".join(line[:300] for line in chunked[:3]) if chunked
                  else "cuDNN's fused attention for every shape")
    summary = text[text.find("profile: "):] if "profile: " in text else ""
    kinds = re.findall(r"^  (\w+)\s+\d+\s+\S+\s+(\S+)%\s+(.*)$", summary,
                       re.MULTILINE)
    check.row(f"{name}: profile (top op kinds)",
              "; ".join(f"{k} {share}% {rate}" for k, share, rate in kinds[:6])
              or "no profile summary")
    if trace.exists() and seq <= 4096:
        with open(trace, "rb") as source, \
                gzip.open(check.work / f"{program}.trace.json.gz", "wb") as target:
            shutil.copyfileobj(source, target)
    return tokens_per_second


def sanitizer(check, args):
    """memcheck over every conformance case, racecheck over those whose
    kernels share memory within a block."""
    tool = shutil.which("compute-sanitizer") or next(
        (path for path in ("/usr/local/cuda/bin/compute-sanitizer",
                           "/usr/local/cuda/compute-sanitizer/compute-sanitizer")
         if os.path.exists(path)), None)
    if not tool:
        check.row("compute-sanitizer", "SKIPPED: no compute-sanitizer here")
        return
    for kind, flags, limit in (("memcheck", [], 150),
                               ("racecheck", [f"--filter={SHARED_MEMORY_OPS}"],
                                90)):
        code, text = check.run(
            f"compute-sanitizer --tool {kind}",
            [tool, "--tool", kind, "--print-limit", "20",
             args.bin / "twill-conformance", "--backend=cuda", *flags],
            limit, f"sanitizer-{kind}.txt")
        summary = re.search(r"ERROR SUMMARY: (.*)$", text, re.MULTILINE)
        cases = re.findall(r"^\[\d+\] .* (PASS|FAIL)$", text, re.MULTILINE)
        tail = " / ".join(text.strip().splitlines()[-3:])
        check.row(f"compute-sanitizer --tool {kind} over the conformance",
                  not_run(code, text) or
                  (f"{summary.group(1)} in {len(cases)} cases"
                   if summary else f"no summary (exit {code}): {tail}") +
                  ("" if code is not None else "; cut off at its limit"))


def deadline(text):
    """--deadline's seconds: nan or inf would be no deadline at all (a
    part's limit against nan is its own), and within RESERVE + 1 s of the
    start no part runs."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value <= RESERVE + 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be a number of seconds above {RESERVE + 1} (the "
            f"check keeps {RESERVE} s after its last part to pack)")
    return value


def part_names(text):
    names = {name.strip() for name in text.split(",")} - {""}
    unknown = sorted(names - set(PARTS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            (f"no such part: {', '.join(unknown)}" if unknown else
             "no part named") + f"; the parts are {', '.join(PARTS)}")
    return names


def prepare(parser, args):
    """Refuses, before anything runs or is written, a path the check cannot
    use; then makes OUT and a new folder under --work, and starts the
    check's log. os.path's tests, not Path's: those raise where a folder on
    the way cannot be read."""
    if not os.path.isdir(args.bin):
        parser.error(f"--bin {args.bin}: not a folder")
    missing = [name for name, users in RUNS.items() if args.parts & users and
               not (os.path.isfile(args.bin / name) and
                    os.access(args.bin / name, os.X_OK))]
    if missing:
        parser.error(f"--bin {args.bin}: no {' or '.join(missing)} there "
                     "(the parts asked for run it)")
    if args.parts & COMPILED and not os.path.isdir(args.programs):
        parser.error(f"--programs {args.programs}: not a folder "
                     "(bench/compile_gpu_programs.sh makes it)")
    for flag, path in (("--out", args.out), ("--work", args.work)):
        if os.path.lexists(path) and not os.path.isdir(path):
            parser.error(f"{flag} {path}: not a folder")
    if args.work.resolve().is_relative_to(args.out.resolve()):
        parser.error(f"--work {args.work}: inside --out {args.out}, every "
                     "file of which comes back (at most 8)")
    # OUT may be a folder of the user's: only these names are written there,
    # and never over a file that has one (a user's, or an earlier check's).
    there = [name for name in OUTPUTS if os.path.lexists(args.out / name)]
    if there:
        parser.error(f"--out {args.out}: holds {', '.join(there)} already, "
                     "which the check would overwrite; name another folder")
    # Not --work itself, emptied: it may be a folder of the user's, and
    # telling an earlier check's folder from one by a marker would still
    # delete what the user put in it since. A new folder in it deletes
    # nothing, and packs no earlier run's output with this one's.
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"--out {args.out}: cannot make it: {error.strerror}")
    try:
        args.work.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="device-check-", dir=args.work))
    except OSError as error:
        parser.error(f"--work {args.work}: cannot make a folder in it: "
                     f"{error.strerror}")
    try:
        return Check(args.out, work, args.deadline)
    except OSError as error:
        work.rmdir()  # made just now, and empty
        parser.error(f"--out {args.out}: cannot write in it: {error.strerror}")


def main():
    parser = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--programs", type=Path, default=Path("/tmp/twill-gpu"))
    parser.add_argument("--tests", type=Path, default=here.parent / "test" / "gpu")
    parser.add_argument("--data", type=Path,
                        default=here.parent / "data" / "recall" / "train.jsonl")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/twill-check"),
                        help="where a new folder takes each part's output "
                        "before it is packed")
    parser.add_argument("--deadline", type=deadline, default=540,
                        help="seconds for the whole check")
    parser.add_argument("--parts", type=part_names, default=",".join(PARTS),
                        help="which parts, comma-separated: " + ", ".join(PARTS))
    args = parser.parse_args()
    parts = args.parts
    check = prepare(parser, args)
    args.bin = args.bin.resolve()
    check.say(f"each part's output: {check.work}")

    def stopped(signum, frame):  # the caller's own limit: keep what is known
        check.kill_group()
        check.row("device check", f"stopped by signal {signum}")
        check.write_results(ended=True)
        check.pack()
        sys.exit(1)
    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)

    code, text = check.run("gpu", ["nvidia-smi", "--query-gpu=name,memory.total,"
                                   "driver_version", "--format=csv,noheader"],
                           20, "nvidia-smi.txt")
    check.row("GPU (nvidia-smi)", text.strip().splitlines()[-1][:200]
              if code == 0 and text.strip() else
              not_run(code, text) or f"SKIPPED: no GPU ({text.strip()[:200]})")
    # The chunked kernel's step is the fused attention's baseline, measured
    # in the same run (TWILL_CUDA_ATTENTION=chunked).
    chunked = {"TWILL_CUDA_ATTENTION": "chunked"}
    steps = [(4096, "llama8b-4096", "seq 4096", 120, "steps", None),
             (4096, "llama8b-chunked-4096", "seq 4096, chunked attention",
              120, "steps", chunked),
             (4096, "llama8b-dropout-4096", "seq 4096, LoRA dropout 0.1", 120,
              "steps", None),
             (16384, "llama8b-16384", "seq 16384", 150, "steps", None),
             (32768, "llama8b-long-32768", "seq 32768, FULL + offload + tiles",
              180, "long", None)]

    def guarded(name, part, *arguments):
        try:  # one part's failure must not stop the next
            return part(*arguments)
        except Exception as error:
            check.row(name, f"FAILED: {error!r}")

    if "conformance" in parts:
        guarded("conformance", conformance, check, args)
    if "nccl" in parts:
        guarded("NCCL: two ranks on one GPU", nccl_one_gpu, check, args)
    if "cuda_vs_cpu" in parts:
        guarded("gpu.cuda_vs_cpu", cuda_vs_cpu, check, args)
    peak = guarded("bf16 GEMM peak", gemm_peak, check) if "peak" in parts \
        else None
    speed = {}
    for seq, program, what, limit, part, env in steps:
        if part in parts:
            speed[program] = guarded(f"8B LoRA step, {what}", llama_step,
                                     check, args, seq, peak, program, what,
                                     limit, env)
    if speed.get("llama8b-4096") and speed.get("llama8b-chunked-4096"):
        check.row("cuDNN's fused attention against the chunked kernel: "
                  "the 8B LoRA step's tokens/s at seq 4096",
                  f"{speed['llama8b-4096'] / speed['llama8b-chunked-4096']:.2f}x")
    if "sanitizer" in parts:
        guarded("compute-sanitizer", sanitizer, check, args)
    check.row("device check wall time",
              f"{time.monotonic() - check.began:.0f} s of a {args.deadline:.0f} s "
              "deadline")
    check.write_results(ended=True)
    check.pack()


if __name__ == "__main__":
    main()
