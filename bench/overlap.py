"""Collectives in flight against collectives waited at once (issue 16):
the same LoRA job under mpirun on dp x tp meshes, compiled with
parallel.overlap_communication on (twill-schedule) and off, measured in
this one run.

    python bench/overlap.py BUILD/bin [--meshes 2x2 4x1] [--steps 5]
                            [--repeats 3] [--markdown FILE]

The model is bench/cpu_step.py's (Llama, hidden 512, 8 layers, seq 512,
LoRA rank 8 on every projection, fp32), batch 2 per data-parallel rank.
Each run trains `--steps` steps on every rank of the mesh
(OMP_NUM_THREADS=1: one thread per rank); the first step is dropped. The
two settings take turns, `--repeats` times each, and the median kept step
of each is reported with their ratio. Once more per setting with
--profile, rank 0's time blocked in communication per step: in blocking
collectives and waits (the exposed part), and in starts (staging copies).
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_step import BATCH, cpu_name, mesh_steps, write_data  # noqa: E402

COLLECTIVES = {"all_gather", "reduce_scatter", "all_reduce", "all_to_all"}


def run(bin_dir, work, dp, tp, overlap, steps, profile=False):
    """Step times (s) of one training run on a dp x tp mesh, and with
    `profile` rank 0's seconds per step blocked in (collectives and waits,
    starts)."""
    name = f"{dp}x{tp}-{'overlap' if overlap else 'waited'}"
    flags = [f"--profile={work / 'trace.json'}"] if profile else []
    times, stdout = mesh_steps(
        bin_dir, work, name,
        [f"parallel.dp={dp}", f"parallel.tp={tp}",
         f"parallel.overlap_communication={str(overlap).lower()}"],
        dp * tp, steps, flags)
    if not profile:
        return times, None
    blocked = started = 0.0
    for kind, milliseconds in re.findall(r"^  (\w+)\s+\d+\s+(\S+)\s+\S+%",
                                         stdout, re.MULTILINE):
        if kind in COLLECTIVES or kind == "wait":
            blocked += float(milliseconds) / 1e3
        elif kind.endswith("_start"):
            started += float(milliseconds) / 1e3
    # The summary counts the steps after the first.
    return times, (blocked / (steps - 1), started / (steps - 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--meshes", nargs="+", default=["2x2", "4x1"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    lines = ["| mesh | waited at once | in flight (twill-schedule) | "
             "waited / in flight | blocked in communication per step "
             "(waited → in flight) | starts per step (in flight) |",
             "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        dps = [int(mesh.split("x")[0]) for mesh in args.meshes]
        write_data(work / "data.jsonl", BATCH * max(dps) * args.steps)
        for mesh in args.meshes:
            dp, tp = (int(size) for size in mesh.split("x"))
            kept = {True: [], False: []}
            for _ in range(args.repeats):
                for overlap in (False, True):
                    kept[overlap] += run(bin_dir, work, dp, tp, overlap,
                                         args.steps)[0][1:]
            waited = statistics.median(kept[False])
            flight = statistics.median(kept[True])
            (blocked_waited, _) = run(bin_dir, work, dp, tp, False,
                                      args.steps, profile=True)[1]
            (blocked_flight, starts) = run(bin_dir, work, dp, tp, True,
                                           args.steps, profile=True)[1]
            lines.append(f"| {dp}x{tp} | {waited:.3f} s | {flight:.3f} s | "
                         f"{waited / flight:.2f} | {blocked_waited:.3f} → "
                         f"{blocked_flight:.3f} s | {starts:.3f} s |")
            print(lines[-1], flush=True)
    if args.markdown:
        args.markdown.write_text(
            f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
            f"{os.cpu_count()} cores: one LoRA step (module docstring) per "
            "mesh, collectives waited at once "
            "(`parallel.overlap_communication=false`) against in flight "
            f"(the default), median of the steps after the first over "
            f"{args.repeats} alternating runs a setting.\n\n"
            + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
