"""The parts of the device check (bench/device_check.py), each a function of
the running Check, the parsed flags and its limits; each writes its rows.

What the parts read of the tools' output: twill-conformance's case lines
and totals; the lines cuDNN's fused attention and NCCL write on stderr
(`twill: cuDNN V planned attention ... forward in X s, gradient in Y s`,
`NCCL version V`, `twill: attention ... runs the chunked kernel: why`);
twill-train's `metrics.jsonl`, memory line and profile summary; twillc's
reports (NAME.report-CARD.txt, written where the programs were compiled).
"""
import gzip
import json
import math
import os
import random
import re
import shutil
import statistics
import sys

# Llama-3.1-8B: layers, hidden, MLP, KV width, vocab; LoRA rank 16 on all.
L, D, FFN, KV, VOCAB, RANK = 32, 4096, 14336, 1024, 128256, 16
DATASHEET_PEAK = 989e12  # H100/H200 SXM dense bf16
GOALS = {4096: 13000, 16384: 9000}  # tokens/s on one H200 (issue 60)
NCCL_TOLERANCE = 1e-5  # fp32: the cuda and cpu kernels' rounding
# Ops whose cuda kernels share memory within a block (blockSum, blockMax).
SHARED_MEMORY_OPS = "attention,cross_entropy,norm,sum_squares"

# The cards the check knows: each one's cluster file (clusters/), and the
# programs it runs instead of the H200's where the H200's do not fit.
CARDS = {"h200": {"cluster": "h200.textproto", "programs": {}},
         "h100": {"cluster": "h100.textproto",
                  "programs": {"llama8b-16384": "llama8b-16384-h100"}}}


def card_of(gpu):
    """The card an nvidia-smi line ("NAME, MEMORY MiB, DRIVER") names: by
    its name, else by its memory (an H200's 141 GB against 80); h200 where
    there is no GPU."""
    name = gpu.split(",")[0]
    for card in CARDS:
        if card.upper() in name.upper():
            return card
    memory = re.search(r",\s*(\d+) MiB", gpu)
    return "h100" if memory and int(memory.group(1)) < 100 * 1024 else "h200"


def flops_per_token(seq):
    """The FLOPs a token of the 8B step needs: 4N for the matmuls with
    frozen weights (forward and the input gradient; N = the decoder's and
    lm_head's weights), 6 L d T for causal attention forward and backward
    (half of PaLM's 12 L d T, which counts the masked half), 6 r (d_in +
    d_out) per LoRA adapter (forward, input and weight gradients)."""
    matmul_weights = L * (2 * D * D + 2 * D * KV + 3 * D * FFN) + D * VOCAB
    adapters = L * sum(d_in + d_out for d_in, d_out in [
        (D, D), (D, KV), (D, KV), (D, D), (D, FFN), (D, FFN), (FFN, D)])
    return 4 * matmul_weights + 6 * L * D * seq + 6 * RANK * adapters


NOT_RUN = "not run: the deadline had come\n"
SKIP = 77


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


def tail(text, lines=3, width=400):
    return " / ".join(text.strip().splitlines()[-lines:])[-width:]


class Libraries:
    """The library versions the tools' output names, for their row."""
    def __init__(self):
        self.found = {}

    def read(self, where, text):
        for library, pattern in (("cuDNN", r"twill: cuDNN (\S+) planned"),
                                 ("NCCL", r"NCCL version (\S+)")):
            for version in sorted(set(re.findall(pattern, text))):
                self.found.setdefault((library, version), set()).add(where)

    def row(self, check):
        check.row("libraries the parts loaded", "; ".join(
            f"{library} {version} ({', '.join(sorted(where))})"
            for (library, version), where in sorted(self.found.items()))
            or "SKIPPED: no part named one (none ran on a GPU)")


def plans(text):
    """cuDNN's plan times in a part's output, in a few words."""
    made = re.findall(r"twill: cuDNN \S+ planned attention of .*: forward "
                      r"(in ([\d.]+) s|refused), gradient (in ([\d.]+) s|"
                      r"refused)$", text, re.MULTILINE)
    if not made:
        return "no cuDNN plan built"
    seconds = [float(s) for _, f, _, g in made for s in (f, g) if s]
    refused = sum(f == "refused" for f, *_ in made) + \
        sum(g == "refused" for _, _, g, _ in made)
    return (f"cuDNN planned {len(made)} attention shapes, each graph in at "
            f"most {max(seconds, default=0):.2f} s, {sum(seconds):.1f} s in "
            f"all" + (f"; {refused} graphs refused" if refused else ""))


def conformance(check, args, limits):
    """The conformance under TWILL_CUDA_ATTENTION=fused (a shape Twill maps
    onto cuDNN's fused attention runs it or fails its case), from its first
    case, going on in a new process after a case that ends the GPU's
    context, within one limit; then each failed case alone, within
    another."""
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1", TWILL_CUDA_ATTENTION="fused")
    command = [args.bin / "twill-conformance", "--backend=cuda"]
    what = ("conformance (twill-conformance --backend=cuda, collectives first, "
            "CUDA_LAUNCH_BLOCKING=1, TWILL_CUDA_ATTENTION=fused)")
    first, failed, totals, stops, texts = 0, [], [], [], []
    budget = check.budget(limits["conformance"])
    while True:
        code, text = check.run(f"conformance from case {first}",
                               command + [f"--first={first}"], budget.left(),
                               f"conformance-{first}.txt", env)
        if not_run(code, text):
            if not totals:
                check.row(what, not_run(code, text))
                return
            break
        texts.append(text)
        failed += re.findall(r"^\[(\d+)\] (.*) FAIL$", text, re.MULTILINE)
        totals += re.findall(r"^conformance: \d+ of .*$", text, re.MULTILINE)
        stop = re.search(r"^conformance: .* --first=(\d+)$", text,
                         re.MULTILINE)
        if not stop or code is None:
            break
        stops.append(stop.group(0))
        first = int(stop.group(1))
    args.libraries.read("the conformance", "".join(texts))
    ended = code is not None and not not_run(code, text)
    check.row(what,
              (" + ".join(totals) or f"no total (exit {code})") +
              (f"; the GPU's context was lost {len(stops)} time(s): "
               f"{' / '.join(stops)}" if stops else "") +
              ("" if ended else "; cut off before the last case") +
              (f"; failed: {'; '.join(f'[{n}] {line}' for n, line in failed[:12])}"
               if failed else ""))
    # Under =fused a case meant for cuDNN's kernels passes only on them.
    fused = re.findall(r"^\[\d+\] .*\(fused on cuda\)\): .* (PASS|FAIL)$",
                       "".join(texts), re.MULTILINE)
    check.row("conformance: cuDNN's plans",
              f"{fused.count('PASS')} of {len(fused)} cases meant for cuDNN's "
              f"fused attention passed on it; {plans(''.join(texts))}")
    # The gradients again from recomputed statistics, the baseline the
    # kept ones are checked against (each case runs its forward first).
    code, text = check.run(
        "conformance, attention_grad recomputing the statistics",
        command + ["--filter=attention_grad"],
        limits["conformance recomputed"], "conformance-recomputed.txt",
        dict(env, TWILL_ATTENTION_STATISTICS="recompute"))
    total = re.search(r"^conformance: \d+ of .*$", text, re.MULTILINE)
    check.row("conformance: attention_grad, its statistics recomputed "
              "(TWILL_ATTENTION_STATISTICS=recompute)", not_run(code, text) or
              (total.group(0) if total else f"no total (exit {code})") +
              ("" if code is not None else "; cut off at its limit"))
    alone = []
    reruns = check.budget(limits["conformance reruns"])
    for number, line in failed[:12]:
        if reruns.left() < 1:
            alone.append(f"[{number}] not run again (the reruns' "
                         f"{limits['conformance reruns']} s were spent)")
            continue
        code, text = check.run(f"conformance case {number} alone",
                               command + [f"--case={number}"],
                               min(15, reruns.left()),
                               f"conformance-case-{number}.txt", env)
        verdict = ("fails alone" if code == 1 else
                   "passes alone (another case's failure)" if code == 0 else
                   f"exit {code}")
        alone.append(f"[{number}] {verdict}")
    if alone:
        check.row("conformance: each failed case run again alone",
                  "; ".join(alone))


def cuda_vs_cpu(check, args, limits):
    code, text = check.run(
        "cuda_vs_cpu",
        [sys.executable, args.tests / "cuda_vs_cpu.py", "--bin", args.bin,
         "--work", args.programs / "gpu", "--data", args.data, "--precompiled"],
        limits["cuda_vs_cpu"], "cuda_vs_cpu.txt")
    lines = [line for line in text.splitlines() if line.strip()]
    check.row("gpu.cuda_vs_cpu", not_run(code, text) or
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


def gemm_peak(check, args, limits):
    code, text = check.run("bf16 GEMM peak", [sys.executable, "-c", GEMM_PEAK],
                           limits["peak"], "gemm_peak.txt")
    found = re.search(r"^peak (\S+)", text, re.MULTILINE)
    peak = float(found.group(1)) if found else None
    what = "bf16 GEMM peak measured (8192^3, PyTorch cuBLAS, median of 20)"
    check.row(what, f"{peak / 1e12:.0f} TFLOP/s" if peak else
              not_run(code, text) or
              f"not measured (exit {code}); MFU against the datasheet only")
    args.peak = peak


def step_data(check, seq):
    """Four rows of `seq` random tokens, written once per length."""
    data = check.work / f"data-{seq}.jsonl"
    if not data.exists():
        rng = random.Random(seq)
        with open(data, "w") as f:
            for _ in range(4):
                ids = [rng.randrange(128000) for _ in range(seq)]
                f.write(json.dumps({"input_ids": ids}) + "\n")
    return data


def report(args, program):
    """twillc's report of `program` at the card's cluster, or ""."""
    path = args.programs / f"{program}.report-{args.card}.txt"
    return path.read_text() if path.exists() else ""


def profile_kinds(text):
    """The profile summary's op kinds: (kind, ms, share %, rate text)."""
    summary = text[text.find("profile: "):] if "profile: " in text else ""
    return re.findall(r"^  (\w+)\s+\d+\s+([\d.]+)\s+([\d.]+)%\s+(.*)$",
                      summary, re.MULTILINE)


def llama_step(check, args, step, limit):
    """Runs bench/compile_gpu_programs.sh's program of `step` (the card's)
    on rows of random tokens, with its environment; rows of its figures.
    Returns what the calibration and the ratios read, or None."""
    program = CARDS[args.card]["programs"].get(step.program, step.program)
    data = step_data(check, step.seq)
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
        f"Llama-3.1-8B LoRA step, {step.what}",
        ["sh", "-c", sampler, "sh", memory, args.bin / "twill-train",
         args.programs / f"{program}.twx", "--backend=cuda", "--data", data,
         f"--profile={trace}"], limit, f"{program}.txt",
        dict(os.environ, **step.env))
    args.libraries.read("the 8B steps", text)
    sampled = ([int(x) for x in memory.read_text().split() if x.isdigit()]
               if memory.exists() else [])
    metrics = args.programs / f"{program}-out" / "metrics.jsonl"
    # The steps' figures even where the run failed or was stopped after
    # them (at its end), with the failure said beside them.
    steps = ([json.loads(line) for line in metrics.read_text().splitlines()]
             if metrics.exists() else [])
    name = f"8B LoRA step, {step.what}"
    if code != 0:
        check.row(name, not_run(code, text) or
                  f"FAILED (exit {code}): {tail(text, 4)}")
    if len(steps) < 2:
        return None
    tokens_per_second = statistics.median(s["tokens_per_second"]
                                          for s in steps[1:])
    achieved = tokens_per_second * flops_per_token(step.seq)
    goal = GOALS.get(step.seq)
    check.row(f"{name}: tokens/s (median of steps 2-{len(steps)}, profiled)",
              f"{tokens_per_second:,.0f}" +
              (f" (goal {goal:,} on one H200)" if goal else ""))
    check.row(f"{name}: MFU",
              (f"{achieved / args.peak:.1%} of the measured peak, "
               if args.peak else "") +
              f"{achieved / DATASHEET_PEAK:.1%} of 989 TFLOP/s")
    measured = statistics.median(b["elapsed_seconds"] - a["elapsed_seconds"]
                                 for a, b in zip(steps[1:], steps[2:])) \
        if len(steps) > 2 else step.seq / tokens_per_second
    predicted = re.search(r"^  step ([\d.]+) ms", report(args, program),
                          re.MULTILINE)
    cluster = CARDS[args.card]["cluster"]
    check.row(f"{name}: step time, twillc's prediction at clusters/{cluster} "
              "against measured (profiled)",
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
    if step.env.get("TWILL_CUDA_ATTENTION") != "chunked":
        # twill-train names each shape cuDNN's fused attention did not take.
        chunked = re.findall(r"^twill: (attention.*runs the chunked kernel: "
                             r".*)$", text, re.MULTILINE)
        check.row(f"{name}: attention",
                  ("; ".join(line[:300] for line in chunked[:3]) if chunked
                   else "cuDNN's fused attention for every shape") +
                  f"; {plans(text)}")
    kinds = profile_kinds(text)
    check.row(f"{name}: profile (top op kinds)",
              "; ".join(f"{k} {share}% {rate}" for k, _, share, rate in kinds[:6])
              or "no profile summary")
    if trace.exists() and step.seq <= 4096:
        with open(trace, "rb") as source, \
                gzip.open(check.work / f"{program}.trace.json.gz", "wb") as target:
            shutil.copyfileobj(source, target)
    return {"tokens_per_second": tokens_per_second, "seconds": measured,
            "kinds": kinds, "report": report(args, program),
            "baseline": bool(step.env)}


RATE = re.compile(r"([\d.]+) ([KMGTP]?)(FLOP|B)/s")
PREFIXES = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
BREAKDOWN = re.compile(
    r"compute by what bounds each op: matmul FLOPs ([\d.]+) ms at "
    r"([\d.e+-]+) TFLOP/s, attention FLOPs ([\d.]+) ms at ([\d.e+-]+) "
    r"TFLOP/s, bytes ([\d.]+) ms at ([\d.e+-]+) GB/s")


def measured_rates(kinds):
    """What a profile's op kinds ran at, by the rate twillc's estimate gives
    each (cluster.proto): attention and its gradient (FLOP/s), the other
    kinds counted in FLOPs (matmuls, the tiled loss), and those counted in
    bytes: each class's work over its time."""
    work = {}
    for kind, ms, _, rate in kinds:
        found = RATE.match(rate.strip())
        if not found:
            continue
        seconds = float(ms) / 1e3
        kind_class = ("bytes" if found.group(3) == "B" else
                      "attention" if kind.startswith("attention") else
                      "matmul")
        done, spent = work.get(kind_class, (0.0, 0.0))
        work[kind_class] = (
            done + float(found.group(1)) * PREFIXES[found.group(2)] * seconds,
            spent + seconds)
    return {name: done / spent for name, (done, spent) in work.items()
            if spent > 0}


def repredict(report_text, rates):
    """twillc's step (ms) with each class of its compute at a measured rate
    (its report's breakdown rescaled; the rest, communication not hidden,
    as it was), or None where the report has no breakdown."""
    found = BREAKDOWN.search(report_text)
    step = re.search(r"^  step ([\d.]+) ms", report_text, re.MULTILINE)
    if not found or not step:
        return None
    mm, mr, am, ar, bm, br = map(float, found.groups())
    scaled = {"matmul": (mm, mr * 1e12), "attention": (am, ar * 1e12),
              "bytes": (bm, br * 1e9)}
    compute = sum(ms * (rate / rates[name] if name in rates else 1)
                  for name, (ms, rate) in scaled.items())
    return compute + float(step.group(1)) - (mm + am + bm)


def calibrated_cluster(text, rates, card):
    """The card's cluster file with the measured rates."""
    fields = {"matmul_tflops": rates.get("matmul", 0) / 1e12,
              "attention_tflops": rates.get("attention", 0) / 1e12,
              "memory_gbps": rates.get("bytes", 0) / 1e9}
    for field, value in fields.items():
        if value > 0:
            figure = f"{value:.6f}".rstrip("0").rstrip(".")
            text = re.sub(rf"^{field}: .*$", f"{field}: {figure}", text,
                          flags=re.MULTILINE)
    return (f"# clusters/{CARDS[card]['cluster']} with the rates the device "
            "check measured in the 8B LoRA step's profile at seq 4096\n"
            "# (bench/device_check.py: matmuls and the tiled loss, attention "
            "and its gradient, and\n# the ops counted in bytes, each class's "
            "work over its time).\n" + text)


def calibration(check, args, measured):
    """The estimate's rates from the seq-4096 step's profile, written as a
    cluster file into OUT, and each step predicted with them."""
    what = ("twillc's estimate calibrated by the seq-4096 step's profile, "
            "against each step measured")
    base = measured.get("llama8b-4096")
    if not base:
        check.row(what, "SKIPPED: no seq-4096 step ran to calibrate it by")
        return
    rates = measured_rates(base["kinds"])
    if not rates:
        check.row(what, "not made: the seq-4096 step gave no profile")
        return
    cluster = args.clusters / CARDS[args.card]["cluster"]
    if cluster.exists():
        (check.out / "calibrated-cluster.textproto").write_text(
            calibrated_cluster(cluster.read_text(), rates, args.card))
    predictions = []
    for program, figures in measured.items():
        # A baseline runs another kernel than the rates were measured on.
        ms = figures and not figures["baseline"] and \
            repredict(figures["report"], rates)
        if ms:
            actual = figures["seconds"] * 1e3
            predictions.append(f"{program} predicted {ms:.4g} ms, measured "
                               f"{actual:.4g} ms ({ms / actual - 1:+.0%})")
    check.row(what, "rates: " + ", ".join(
        f"{name} {rate / (1e9 if name == 'bytes' else 1e12):.4g} "
        f"{'GB/s' if name == 'bytes' else 'TFLOP/s'}"
        for name, rate in sorted(rates.items())) +
        " (calibrated-cluster.textproto); " +
        ("; ".join(predictions) or "no report with a breakdown to predict"))


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


def nccl_one_gpu(check, args, limits):
    """The tiny job on 2x1 and 1x2, both ranks on the one GPU with the NCCL
    the bundle brings (TWILL_BUNDLED_NCCL: 2.30's multi-rank GPUs), against
    the same mesh on the cpu backend (bench/compile_gpu_programs.sh's
    nccl-* programs, whose collective timeout is short). A run that hangs
    ends the part: the other mesh would hang as well."""
    env = dict(os.environ, NCCL_MULTI_RANK_GPU_ENABLE="1", OMP_NUM_THREADS="1")
    bundled = os.environ.get("TWILL_BUNDLED_NCCL")
    if bundled:
        env["LD_LIBRARY_PATH"] = ":".join(
            filter(None, [bundled, env.get("LD_LIBRARY_PATH")]))
    budget = check.budget(limits["nccl"])
    meshes = ["2x1", "1x2"]
    for index, mesh in enumerate(meshes):
        what = f"NCCL: the tiny job on {mesh}, two ranks on one GPU, against the cpu"
        losses, version = {}, None
        for backend in ("cuda", "cpu"):
            name = f"nccl-{mesh}-{backend}"
            code, text = check.run(
                f"tiny job {mesh} on {backend}",
                [sys.executable, "-c", RANKS, "2", args.bin / "twill-train",
                 args.programs / f"{name}.twx", f"--backend={backend}",
                 "--data", args.data], min(limits["nccl run"], budget.left()),
                f"{name}.txt", env)
            if backend == "cuda":
                args.libraries.read("the nccl part", text)
                version = re.search(r"NCCL version (\S+)", text)
            metrics = args.programs / f"{name}-out" / "metrics.jsonl"
            if code != 0 or not metrics.exists():
                check.row(what, not_run(code, text) or
                          f"FAILED on {backend} (exit {code}): {tail(text)}")
                if code is None and text != NOT_RUN:
                    for other in meshes[index + 1:]:
                        check.row(f"NCCL: the tiny job on {other}, two ranks "
                                  "on one GPU, against the cpu",
                                  f"NOT RUN: {mesh} did not end")
                    return
                losses = None
                break
            losses[backend] = [json.loads(line)["loss"]
                               for line in metrics.read_text().splitlines()]
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
                  f"{version.group(1) if version else '(its version unsaid)'}")


def sanitizer(check, args, limits):
    """memcheck over every conformance case, racecheck over those whose
    kernels share memory within a block."""
    tool = shutil.which("compute-sanitizer") or next(
        (path for path in ("/usr/local/cuda/bin/compute-sanitizer",
                           "/usr/local/cuda/compute-sanitizer/compute-sanitizer")
         if os.path.exists(path)), None)
    if not tool:
        check.row("compute-sanitizer", "SKIPPED: no compute-sanitizer here")
        return
    for kind, flags in (("memcheck", []),
                        ("racecheck", [f"--filter={SHARED_MEMORY_OPS}"])):
        code, text = check.run(
            f"compute-sanitizer --tool {kind}",
            [tool, "--tool", kind, "--print-limit", "20",
             args.bin / "twill-conformance", "--backend=cuda", *flags],
            limits[kind], f"sanitizer-{kind}.txt")
        summary = re.search(r"ERROR SUMMARY: (.*)$", text, re.MULTILINE)
        cases = re.findall(r"^\[\d+\] .* (PASS|FAIL)$", text, re.MULTILINE)
        check.row(f"compute-sanitizer --tool {kind} over the conformance",
                  not_run(code, text) or
                  (f"{summary.group(1)} in {len(cases)} cases"
                   if summary else f"no summary (exit {code}): {tail(text)}") +
                  ("" if code is not None else "; cut off at its limit"))
