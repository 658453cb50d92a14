"""The planner's cost estimate against measured steps (issue 19): this
machine is calibrated on 4 ranks (`twill plan --calibrate`), then every
mesh 4 ranks allow, with each activation checkpointing choice, is both
predicted (`twillc --report --cluster`) and measured (mpirun twill-train),
and `twillc --plan`'s choice is compared with the measured best. The
baseline, predicted in the same run: the calibrated cluster without its
attention rates (attention at the GEMM rate, as before they were measured).

    python bench/plan_check.py BUILD/bin [--steps 6] [--repeats 3]
                               [--markdown FILE]

The model is bench/cpu_step.py's (Llama, hidden 512, 8 layers, seq 512,
LoRA rank 8 on every projection, fp32), a global batch of 2 rows. Each run
trains `--steps` steps on 4 ranks (OMP_NUM_THREADS=1: one thread per rank,
as calibrated); the first step is dropped. The settings take turns,
`--repeats` times each (the machine's speed drifts: all see the same
drift), and the median kept step of each is compared with its prediction.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_step import BATCH, cpu_name, job, mesh_steps, write_data  # noqa: E402

RANKS = 4
MESHES = [(1, 4), (2, 2), (4, 1)]
CHECKPOINTING = ["NONE", "SELECTIVE", "FULL"]


def calibrate(bin_dir, cluster):
    subprocess.run([bin_dir / "twill", "plan", "--calibrate", cluster,
                    "--nproc", str(RANKS)], check=True,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    return cluster.read_text()


def overrides(dp, tp, checkpointing):
    return [f"parallel.dp={dp}", f"parallel.tp={tp}",
            f"parallel.activation_checkpointing={checkpointing}"]


def predicted_step(bin_dir, work, cluster, settings):
    """The step time (s) twillc --report predicts at the cluster's rates."""
    (work / "predict.textproto").write_text(job(1, work / "predict"))
    report = subprocess.run(
        [bin_dir / "twillc", work / "predict.textproto", *settings,
         "--report", f"--cluster={cluster}"],
        check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^  step ([\d.]+) ms", report, re.MULTILINE)
                 .group(1)) / 1e3


def planned(bin_dir, work, cluster):
    """twillc --plan's table and the overrides of the plan it chose."""
    (work / "plan-job.textproto").write_text(job(1, work / "plan"))
    done = subprocess.run(
        [bin_dir / "twillc", work / "plan-job.textproto", "--plan",
         f"--cluster={cluster}", "-o", work / "plan.textproto"],
        check=True, capture_output=True, text=True)
    chosen = re.search(r"^Wrote \S+: (.*) \(", done.stdout, re.MULTILINE)
    return done.stdout, chosen.group(1).split()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        cluster = work / "cluster.textproto"
        calibration = calibrate(bin_dir, cluster)
        table, chosen = planned(bin_dir, work, cluster)
        print(table, flush=True)
        settings = {f"{dp}x{tp} {checkpointing}": overrides(dp, tp,
                                                          checkpointing)
                    for dp, tp in MESHES for checkpointing in CHECKPOINTING}
        # The plan may split the batch into micro-batches: measured too.
        chosen_name = next((name for name, setting in settings.items()
                            if set(setting) <= set(chosen)
                            and "train.gradient_accumulation_steps=1"
                            in chosen), None)
        if chosen_name is None:
            chosen_name = "plan's choice"
            settings[chosen_name] = chosen
        predicted = {name: predicted_step(bin_dir, work, cluster, setting)
                     for name, setting in settings.items()}
        baseline = work / "baseline.textproto"
        baseline.write_text("".join(
            line for line in calibration.splitlines(keepends=True)
            if "attention_tflops" not in line))
        at_gemm_rate = {name: predicted_step(bin_dir, work, baseline, setting)
                        for name, setting in settings.items()}
        write_data(work / "data.jsonl", BATCH * args.steps * 2)
        kept = {name: [] for name in settings}
        for _ in range(args.repeats):
            for index, (name, setting) in enumerate(settings.items()):
                kept[name] += mesh_steps(bin_dir, work, f"run{index}",
                                         setting, RANKS, args.steps)[0][1:]
        measured = {name: statistics.median(times)
                    for name, times in kept.items()}
    lines = ["| mesh, checkpointing | predicted step | measured step | "
             "predicted / measured | attention at the GEMM rate: predicted "
             "/ measured |", "|---|---:|---:|---:|---:|"]
    for name in settings:
        mark = " (plan's choice)" if name == chosen_name else ""
        lines.append(f"| {name}{mark} | {predicted[name]:.3f} s | "
                     f"{measured[name]:.3f} s | "
                     f"{predicted[name] / measured[name]:.2f} | "
                     f"{at_gemm_rate[name] / measured[name]:.2f} |")
    worst = max(abs(predicted[name] / measured[name] - 1) for name in settings)
    worst_at_gemm_rate = max(abs(at_gemm_rate[name] / measured[name] - 1)
                             for name in settings)
    best = min(measured, key=measured.get)
    predicted_order = sorted(settings, key=predicted.get)
    measured_order = sorted(settings, key=measured.get)
    summary = (
        f"Largest error {worst:.0%} (attention at the GEMM rate: "
        f"{worst_at_gemm_rate:.0%}). Measured best: {best} "
        f"({measured[best]:.3f} s); the plan chose {chosen_name} "
        f"({measured[chosen_name]:.3f} s measured, "
        f"{measured[chosen_name] / measured[best]:.2f}x the best).\n"
        f"Predicted order: {', '.join(predicted_order)}\n"
        f"Measured order:  {', '.join(measured_order)}")
    print("\n".join(lines) + "\n\n" + summary)
    if args.markdown:
        args.markdown.write_text(
            f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
            f"{os.cpu_count()} cores, {RANKS} ranks: the model of "
            "bench/cpu_step.py, a global batch of 2 rows of 512 tokens, "
            f"median of the steps after the first over {args.repeats} "
            "alternating runs a setting.\n\nCalibration (`twill plan "
            f"--calibrate FILE --nproc {RANKS}`):\n\n```\n{calibration}```\n\n"
            f"`twillc --plan`:\n\n```\n{table}```\n\n"
            + "\n".join(lines) + "\n\n" + summary + "\n")


if __name__ == "__main__":
    main()
