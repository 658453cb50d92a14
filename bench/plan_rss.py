"""The memory plan against what a cpu run really holds (issue 17): the
peak resident set of twill-train training a job, next to what twillc's plan
says the program needs, at several sequence lengths.

    python bench/plan_rss.py BUILD/bin [--seq-lens 1024 2048 4096]
                             [--steps 2] [--threads 2] [--markdown FILE]

The job is bench/cpu_step.py's model (Llama, hidden 512, 8 layers, vocab
8192, fp32, LoRA rank 8 on all projections), batch 2, random tokens, its
seq_len varied. "The program needs" is every buffer with memory of its own
and the arena (`twillc --report`, printed by twill-train too); the peak
resident set is the kernel's ru_maxrss of the twill-train process (os.wait4).
The process also holds what no plan counts (its code and libraries, MPI,
oneDNN, the dataset, kernel temporaries): the run of the smallest job
measures that floor, and the table shows the peak with and without it.
The cpu backend never touches a buffer no instruction of a run writes, so
the forward pass's logits (read only by an evaluation) take no memory in a
training run: the last column leaves them out of the plan.
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


def measure(bin_dir, work, seq_len, steps, threads):
    """(the plan's bytes, the forward logits' bytes, peak RSS bytes)."""
    out, program = work / f"out-{seq_len}", work / f"job-{seq_len}.twx"
    (work / "job.textproto").write_text(job(steps, out))
    subprocess.run([bin_dir / "twillc", work / "job.textproto",
                    f"train.seq_len={seq_len}", "-o", program], check=True)
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
    needs = int(re.search(r"the program needs .* \((\d+) B\)",
                          output).group(1))
    logits = BATCH * seq_len * MODEL["vocab_size"] * 4
    return needs, logits, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--seq-lens", type=int, nargs="+",
                        default=[1024, 2048, 4096])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    mib = 1 << 20
    lines = ["| seq_len | the plan | the plan without the forward's "
             "logits | peak RSS | peak RSS less the floor | that / the plan "
             "without the logits |", "|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        floor_needs, floor_logits, floor = measure(bin_dir, work, 16,
                                                   args.steps, args.threads)
        floor -= floor_needs - floor_logits
        print(f"floor (seq_len 16, its plan taken out): {floor / mib:.0f} "
              "MiB", flush=True)
        for seq_len in args.seq_lens:
            needs, logits, peak = measure(bin_dir, work, seq_len, args.steps,
                                          args.threads)
            training = needs - logits
            lines.append(
                f"| {seq_len} | {needs / mib:.0f} MiB | {training / mib:.0f} "
                f"MiB | {peak / mib:.0f} MiB | {(peak - floor) / mib:.0f} "
                f"MiB | {(peak - floor) / training:.3f} |")
            print(lines[-1], flush=True)
    if args.markdown:
        args.markdown.write_text(
            f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
            f"{os.cpu_count()} cores: peak resident set of a twill-train "
            "run against its memory plan (module docstring). The floor, "
            f"what the process holds besides its program (seq_len 16, its "
            f"plan taken out), is {floor / mib:.0f} MiB.\n\n"
            + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
