"""The device check: everything a GPU window must find and measure, in order
of value, each part under a limit of its own, all of them under one
deadline.

    python3 bench/device_check.py --bin BIN --out OUT [--programs DIR]
        [--deadline SECONDS] [--work DIR] [--parts NAME,...]

BIN holds twill-train and twill-conformance built with CUDA; DIR the
programs of bench/compile_gpu_programs.sh (compiled where twillc is; they
write under /tmp/twill-gpu) with twillc's report of each at every card's
cluster. Each part runs whatever happened before it, in a process group of
its own (killed whole at its limit), never past the deadline (default 540
s: a 600 s command with time to spare). It first reads the GPU's name and
memory and chooses the card's programs and cluster file (CARDS: an H100's
80 GB takes a seq-16384 program that fits it), then prints its plan: each
part's limit, their sum against the deadline and what that leaves. What a
part prints streams to OUT/device_check.log as it comes, and OUT/results.md
is rewritten after every part, so a run cut short still returns what it
found. At the end OUT holds at most five files (a device call brings back
eight):

    results.md                   the plan, and a table of every figure;
    device_check.log             everything every part printed;
    logs.tar.gz                  each part's output in a file of its own;
    traces.tar.gz                the seq-4096 steps' Chrome traces;
    calibrated-cluster.textproto the card's cluster at the rates measured.

The parts, most valuable first (bench/device_parts.py):

1. conformance: twill-conformance --backend=cuda, every instruction kind
   against the cpu backend, its collectives first, under
   CUDA_LAUNCH_BLOCKING=1 (a kernel's fault fails its own case; one that
   ends the GPU's context goes on from the next case in a new process) and
   TWILL_CUDA_ATTENTION=fused (an attention shape cuDNN's fused kernels are
   mapped to runs them or fails), on the image's NCCL; cuDNN's plan times;
   the attention_grad cases again with the statistics recomputed
   (TWILL_ATTENTION_STATISTICS=recompute: both paths against the cpu);
   each failed case then run again alone, within a limit of their own;
2. cuda_vs_cpu: test/gpu/cuda_vs_cpu.py, train steps and 20-step runs, cuda
   against cpu;
3. peak: the bf16 GEMM peak (8192^3 through PyTorch's cuBLAS), the ceiling
   MFU is measured against;
4. steps: the Llama-3.1-8B-shape LoRA step (bf16, rank 16 on all
   projections, batch 1, one GPU, 4 steps, profiled) at seq 4096: tokens/s,
   MFU, memory against the plan, the profile, twillc's prediction; again
   with the chunked attention kernel and with the softmax statistics
   recomputed (each the baseline of a ratio); at seq 16384; then the
   estimate calibrated: the rates of the seq-4096 profile, written as a
   cluster file, and each step predicted at them;
5. nccl: the tiny job on 2x1 and 1x2, two ranks on the one GPU over the TCP
   launch (the bundle has no MPI) with the NCCL the bundle brings (2.30's
   NCCL_MULTI_RANK_GPU_ENABLE), against the cpu backend (1e-5);
then, where --parts names them (a second call's): dropout (seq 4096 with
LoRA dropout 0.1), long (seq 32768 with every long-context transformation)
and sanitizer (compute-sanitizer over the conformance).

The check itself writes nothing but those files in OUT (it refuses an OUT
that holds one already) and, in a folder it makes new under --work
(default /tmp/twill-check), each part's output, the steps' data and their
memory samples and traces; it deletes nothing. A flag it cannot use (a
deadline that is not a finite number of seconds past the time kept to
pack, an OUT or --work that is not a folder it can write, a --bin without
the programs the parts run, a --programs that is not a folder, an unknown
part) is refused before anything runs: one line, exit 2.

A part that finds no GPU (no device, no driver, no CUDA build, no PyTorch
with CUDA) says SKIPPED, never passed or failed.
"""
import argparse
import collections
import math
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

import device_parts as parts
from device_parts import NOT_RUN, not_run

FILE_LIMIT = 15 << 20  # each file that comes back: under the 16 MiB limit
RESERVE = 8  # seconds kept after the last part, to write and pack
# Seconds the default parts leave unplanned: a rerun's room (a fault's
# conformance going on in a new process, or a step's slow first plan).
ROOM = 45
# A step: its program (the H200's; CARDS names another card's), sequence,
# name in the table, limit in seconds, and what it adds to the environment.
Step = collections.namedtuple("Step", "program seq what limit env")
STEPS = [Step("llama8b-4096", 4096, "seq 4096", 50, {}),
         # The fused attention's baseline: the chunked kernel.
         Step("llama8b-chunked-4096", 4096, "seq 4096, chunked attention", 40,
              {"TWILL_CUDA_ATTENTION": "chunked"}),
         # The kept statistics' baseline: the backward's forward again.
         Step("llama8b-recompute-4096", 4096,
              "seq 4096, attention's statistics recomputed", 40,
              {"TWILL_ATTENTION_STATISTICS": "recompute"}),
         Step("llama8b-16384", 16384, "seq 16384", 70, {})]
DROPOUT = [Step("llama8b-dropout-4096", 4096, "seq 4096, LoRA dropout 0.1",
                50, {})]
LONG = [Step("llama8b-long-32768", 32768, "seq 32768, FULL + offload + tiles",
             150, {})]
# Each part's limit in seconds (the steps': their runs', above).
LIMITS = {"gpu": 10, "conformance": 100, "conformance recomputed": 25,
          "conformance reruns": 20, "cuda_vs_cpu": 50, "peak": 20,
          "nccl": 45, "nccl run": 20, "memcheck": 150, "racecheck": 90}
PARTS = ["conformance", "cuda_vs_cpu", "peak", "steps", "nccl", "dropout",
         "long", "sanitizer"]
DEFAULT_PARTS = PARTS[:5]


def part_limits(part):
    """What a part's time is made of: (what, seconds) of each of its
    limits."""
    steps = {"steps": STEPS, "dropout": DROPOUT, "long": LONG}
    if part in steps:
        return [(step.what, step.limit) for step in steps[part]]
    if part == "conformance":
        return [("from the first case", LIMITS["conformance"]),
                ("attention_grad recomputing the statistics",
                 LIMITS["conformance recomputed"]),
                ("failed cases alone", LIMITS["conformance reruns"])]
    if part == "sanitizer":
        return [("memcheck", LIMITS["memcheck"]),
                ("racecheck", LIMITS["racecheck"])]
    return [(part, LIMITS[part])]


# What the check writes in OUT (results.md.partial: while rewriting it).
OUTPUTS = ["results.md", "results.md.partial", "device_check.log",
           "logs.tar.gz", "traces.tar.gz", "calibrated-cluster.textproto"]
# The programs of --bin, each with the parts that run it, and the parts
# that run the programs of --programs.
RUNS = {"twill-conformance": {"conformance", "sanitizer"},
        "twill-train": {"nccl", "cuda_vs_cpu", "steps", "dropout", "long"}}
COMPILED = {"nccl", "cuda_vs_cpu", "steps", "dropout", "long"}


def plan(parts_run, deadline):
    """The plan's words: each part's limit, in order, and their sum against
    the deadline."""
    words, total = [f"GPU query {LIMITS['gpu']} s"], LIMITS["gpu"] + RESERVE
    for part in PARTS:
        if part in parts_run:
            limits = part_limits(part)
            seconds = sum(limit for _, limit in limits)
            total += seconds
            words.append(f"{part} {seconds} s" + (
                f" ({', '.join(f'{what} {limit}' for what, limit in limits)})"
                if len(limits) > 1 else ""))
    spare = deadline - total
    verdict = (f"{spare:.0f} s to spare, room for one rerun ({ROOM} s)"
               if spare >= ROOM else
               f"{spare:.0f} s to spare: no room for a rerun" if spare >= 0
               else f"{-spare:.0f} s past it: the last parts may be cut off")
    return (", ".join(words) + f"; {RESERVE} s kept to pack: {total} s of "
            f"the {deadline:.0f} s deadline, {verdict}")


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
        self.plan = ""  # the plan's words, above the table

    def budget(self, seconds):
        """A limit shared by several runs: its seconds from now."""
        return Budget(self, seconds)

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
        text = (f"# Device check\n\n{self.plan}\n\n{table}\n\nWall time "
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


class Budget:
    """Seconds several runs of a part share, counted from when it was made."""
    def __init__(self, check, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())


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
    parser.add_argument("--clusters", type=Path, default=here.parent / "clusters",
                        help="the cards' cluster files, calibrated into OUT")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/twill-check"),
                        help="where a new folder takes each part's output "
                        "before it is packed")
    parser.add_argument("--deadline", type=deadline, default=540,
                        help="seconds for the whole check")
    parser.add_argument("--parts", type=part_names,
                        default=",".join(DEFAULT_PARTS),
                        help="which parts, comma-separated: " + ", ".join(PARTS)
                        + " (default: " + ", ".join(DEFAULT_PARTS) + ")")
    args = parser.parse_args()
    check = prepare(parser, args)
    args.bin = args.bin.resolve()
    args.libraries, args.peak = parts.Libraries(), None
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
                           LIMITS["gpu"], "nvidia-smi.txt")
    gpu = text.strip().splitlines()[-1][:200] if code == 0 and text.strip() \
        else None
    args.card = parts.card_of(gpu or "")
    check.plan = (f"Card {args.card} (clusters/"
                  f"{parts.CARDS[args.card]['cluster']}"
                  f"{'' if gpu else ', no GPU seen'}). Plan: "
                  f"{plan(args.parts, args.deadline)}.")
    check.say(check.plan)
    check.row("GPU (nvidia-smi)", gpu or not_run(code, text) or
              f"SKIPPED: no GPU ({text.strip()[:200]})")

    def guarded(name, part, *arguments):
        try:  # one part's failure must not stop the next
            return part(*arguments)
        except Exception as error:
            check.row(name, f"FAILED: {error!r}")

    for name, part in (("conformance", parts.conformance),
                       ("cuda_vs_cpu", parts.cuda_vs_cpu),
                       ("peak", parts.gemm_peak)):
        if name in args.parts:
            guarded(name, part, check, args, LIMITS)
    measured = {}

    def run_steps(steps):
        for step in steps:
            measured[step.program] = guarded(
                f"8B LoRA step, {step.what}", parts.llama_step, check, args,
                step, step.limit)

    if "steps" in args.parts:
        run_steps(STEPS)
        ratios(check, measured)
        guarded("calibration", parts.calibration, check, args, measured)
    # After the steps: two ranks on one GPU are NCCL's experimental case.
    if "nccl" in args.parts:
        guarded("NCCL: two ranks on one GPU", parts.nccl_one_gpu, check, args,
                LIMITS)
    if "dropout" in args.parts:
        run_steps(DROPOUT)
    if "long" in args.parts:
        run_steps(LONG)
    if "sanitizer" in args.parts:
        guarded("compute-sanitizer", parts.sanitizer, check, args, LIMITS)
    args.libraries.row(check)
    check.row("device check wall time",
              f"{time.monotonic() - check.began:.0f} s of a {args.deadline:.0f} s "
              "deadline")
    check.write_results(ended=True)
    check.pack()


def ratios(check, measured):
    """The seq-4096 step against its baselines, measured in the same run."""
    fused = (measured.get("llama8b-4096") or {}).get("tokens_per_second")
    for baseline, what in (
            ("llama8b-chunked-4096",
             "cuDNN's fused attention against the chunked kernel"),
            ("llama8b-recompute-4096",
             "attention's statistics kept against recomputed")):
        other = (measured.get(baseline) or {}).get("tokens_per_second")
        if fused and other:
            check.row(f"{what}: the 8B LoRA step's tokens/s at seq 4096",
                      f"{fused / other:.2f}x")


if __name__ == "__main__":
    main()
