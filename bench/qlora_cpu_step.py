"""One LoRA training step on the cpu with a quantized base (quantization.base
NF4, QLoRA) against the same step with the fp32 base, both Twill's, both
measured in this one run.

    python bench/qlora_cpu_step.py BUILD/bin [--threads 2] [--steps 6]
                                   [--repeats 3] [--markdown FILE]

The model and step are bench/cpu_step.py's (Llama, hidden 512, 8 layers,
MLP 1536, LoRA rank 8 on all seven projections, batch 2 x seq 512, fp32
compute). With NF4 every projection's weight is stored in 4 bits and
formed in fp32 right before its products, in the forward and again in the
backward. The two programs take turns, `--repeats` times each, each
running `--steps` steps in a fresh process; the first step of each run is
dropped and the median of the rest is reported, and the ratio NF4 / fp32
(the issue's target: at most 1.3).
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cpu_step import job, step_times, thread_env, write_data


def steps_of(bin_dir, work, name, overrides, threads, steps):
    """Step times (s) of a run of the job with `overrides`."""
    out, program = work / name, work / f"{name}.twx"
    (work / "job.textproto").write_text(job(steps, out))
    subprocess.run([bin_dir / "twillc", work / "job.textproto", *overrides,
                    "-o", program], check=True)
    run = subprocess.run([bin_dir / "twill-train", program, "--data",
                          work / "data.jsonl"], env=thread_env(threads),
                         capture_output=True, text=True)
    if run.returncode:
        sys.exit(run.stderr)
    return step_times(out)[1:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    sides = {"fp32 base": [], "NF4 base": []}
    overrides = {"fp32 base": [], "NF4 base": ["quantization.base=NF4"]}
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        write_data(work / "data.jsonl", 64)
        for repeat in range(args.repeats):
            for side, times in sides.items():
                times += steps_of(args.bin.resolve(), work,
                                  f"{side.split()[0]}-{repeat}",
                                  overrides[side], args.threads, args.steps)
    medians = {side: statistics.median(times) for side, times in sides.items()}
    ratio = medians["NF4 base"] / medians["fp32 base"]
    lines = [
        f"`python bench/qlora_cpu_step.py build/bin --threads {args.threads} "
        f"--steps {args.steps} --repeats {args.repeats}`: one LoRA step of "
        f"bench/cpu_step.py's model, median of the steps after the first "
        f"over {args.repeats} alternating runs a side.",
        "",
        "| base | step | NF4 / fp32 |",
        "|---|---:|---:|",
        f"| fp32 | {medians['fp32 base']:.3f} s | |",
        f"| NF4 (quantization.base) | {medians['NF4 base']:.3f} s | "
        f"{ratio:.3f} |",
    ]
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
