"""The memory plan against what a cpu run really holds (issue 17): the
peak resident set of twill-train training a job, next to what twillc's plan
says the program needs, at several sequence lengths.

    python bench/plan_rss.py BUILD/bin [--seq-lens 1024 2048 4096]
                             [--steps 2] [--threads 2] [--markdown FILE]
                             [KEY=VALUE ...]

The job is bench/cpu_step.py's model (Llama, hidden 512, 8 layers, vocab
8192, fp32, LoRA rank 8 on all projections), batch 2, random tokens, its
seq_len varied, KEY=VALUE overrides (e.g. parallel.offload_activations=true)
applied to every compile. The plan is what twill-train's memory line (as
`twillc --report`) says a training run holds: what "the program needs"
(every buffer with memory of its own, and the arena) and the host memory
that holds the offloaded activations (a host arena on every backend); the
forward pass's logits, which only an evaluation writes, are left out, as
the cpu backend never touches a buffer no instruction of a run writes. The
peak resident set is the kernel's ru_maxrss of the twill-train process
(os.wait4). The process also holds what no plan counts (its code and
libraries, MPI, oneDNN, the dataset, kernel temporaries): the run of the
smallest job measures that floor, and the table shows the peak with and
without it.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_step import BATCH, MODEL, cpu_name, job  # noqa: E402


def write_data(path, rows, seq_len):
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(rows):
            ids = [rng.randrange(MODEL["vocab_size"]) for _ in range(seq_len)]
            f.write(json.dumps({"input_ids": ids}) + "\n")


def plan_bytes(output):
    """What twill-train's memory line says a training run holds."""
    needs = re.search(r"the program needs [\d.]+ MiB \((\d+) B\)", output)
    if not needs:
        sys.exit("twill-train printed no memory plan:\n" + output)
    host = re.search(r"(\d+) B of host memory hold the offloaded", output)
    return int(needs.group(1)) + (int(host.group(1)) if host else 0)


def measure(bin_dir, work, seq_len, steps, threads, overrides):
    """(the plan's bytes, peak RSS bytes)."""
    out, program = work / f"out-{seq_len}", work / f"job-{seq_len}.twx"
    (work / "job.textproto").write_text(job(steps, out))
    subprocess.run([bin_dir / "twillc", work / "job.textproto",
                    f"train.seq_len={seq_len}", *overrides, "-o", program],
                   check=True)
    data = work / f"data-{seq_len}.jsonl"
    write_data(data, BATCH * steps, seq_len)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    child = subprocess.Popen([bin_dir / "twill-train", program, "--data",
                              data], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    output = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        sys.exit(output)
    return plan_bytes(output), usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--seq-lens", type=int, nargs="+",
                        default=[1024, 2048, 4096])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = parser.parse_intermixed_args()
    bin_dir = args.bin.resolve()
    mib = 1 << 20
    lines = ["| seq_len | the plan | peak RSS | peak RSS less the floor | "
             "that / the plan |", "|---:|---:|---:|---:|---:|"]
    run = dict(bin_dir=bin_dir, steps=args.steps, threads=args.threads,
               overrides=args.overrides)
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        floor_plan, floor = measure(work=work, seq_len=16, **run)
        floor -= floor_plan
        print(f"floor (seq_len 16, its plan taken out): {floor / mib:.0f} "
              "MiB", flush=True)
        for seq_len in args.seq_lens:
            plan, peak = measure(work=work, seq_len=seq_len, **run)
            lines.append(
                f"| {seq_len} | {plan / mib:.0f} MiB | {peak / mib:.0f} MiB "
                f"| {(peak - floor) / mib:.0f} MiB | "
                f"{(peak - floor) / plan:.3f} |")
            print(lines[-1], flush=True)
    if args.markdown:  # appended: one table per set of overrides
        with args.markdown.open("a") as f:
            f.write(f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
                    f"{os.cpu_count()} cores: peak resident set of a "
                    "twill-train run against its memory plan (module "
                    "docstring). The floor, what the process holds besides "
                    "its program (seq_len 16, its plan taken out), is "
                    f"{floor / mib:.0f} MiB.\n\n" + "\n".join(lines)
                    + "\n\n")

if __name__ == "__main__":
    main()
