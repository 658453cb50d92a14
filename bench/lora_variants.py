"""What each LoRA variant costs a training step on the cpu (issue 20):
plain LoRA against dropout, rsLoRA, DoRA and DoRA with dropout, the same
job measured in this one run.

    python bench/lora_variants.py BUILD/bin [--ranks 1] [--steps 6]
                                  [--repeats 3] [--markdown FILE]

The model is bench/cpu_step.py's (Llama, hidden 512, 8 layers, seq 512,
LoRA rank 8 on every projection, fp32), a global batch of 2 rows, on
`--ranks` ranks of one thread each (dp = ranks). The variants take turns,
`--repeats` times each; the first step of a run is dropped and the median
kept step of each variant is reported with its ratio to plain LoRA's.
"""
import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_step import BATCH, cpu_name, mesh_steps, write_data  # noqa: E402

VARIANTS = {
    "LoRA": [],
    "dropout 0.1": ["lora.dropout=0.1"],
    "rsLoRA": ["lora.use_rslora=true"],
    "DoRA": ["lora.use_dora=true"],
    "DoRA, dropout 0.1": ["lora.use_dora=true", "lora.dropout=0.1"],
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    kept = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        write_data(work / "data.jsonl", BATCH * args.steps)
        for _ in range(args.repeats):
            for index, (name, overrides) in enumerate(VARIANTS.items()):
                kept[name] += mesh_steps(
                    bin_dir, work, f"variant{index}",
                    [f"parallel.dp={args.ranks}", *overrides], args.ranks,
                    args.steps)[0][1:]
    plain = statistics.median(kept["LoRA"])
    lines = ["| variant | step | / LoRA |", "|---|---:|---:|"]
    for name, times in kept.items():
        step = statistics.median(times)
        lines.append(f"| {name} | {step:.3f} s | {step / plain:.3f} |")
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text(
            f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
            f"{os.cpu_count()} cores, {args.ranks} rank(s) of one thread: "
            "the model of bench/cpu_step.py, a global batch of 2 rows of 512 "
            f"tokens, median of the steps after the first over {args.repeats} "
            "alternating runs a variant.\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
