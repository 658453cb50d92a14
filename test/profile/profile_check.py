"""twill-train --profile on the cpu backend: the trace and the summary.

    python profile_check.py --bin BUILD/bin --work DIR --config tiny.textproto
        --data train.jsonl

Trains the tiny job for a few steps on one rank and on a 1 x 2 mesh (under
mpirun) with --profile, then checks:
- the trace is valid Chrome trace JSON: named tracks, complete events with
  non-negative times, every instruction span naming its op, shapes, layer,
  entry point and index;
- spans cover the step: each entry point run holds one span per instruction
  of its entry point, inside the run, and they add up to nearly all of the
  runs' time;
- collectives (1 x 2) also show on the communication track;
- the summary printed at exit adds up: its op-kind rows and the time outside
  instructions sum to the runs' time, which is what the trace's entry point
  spans after the first step add up to, within a few percent; its layer
  rows (each layer's forward and backward, and what is outside the layers)
  sum to the instructions' time;
- a train step's instructions go through the layers forward and back.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

STEPS = 4


def run(command, **kwargs):
    result = subprocess.run([str(c) for c in command], capture_output=True,
                            text=True, timeout=600, **kwargs)
    if result.returncode:
        sys.exit(f"{command[0]} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def check_trace(path, expect_collectives):
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names == {0: "compute", 1: "communication", 2: "entry points"}, names
    spans = [e for e in events if e["ph"] == "X"]
    for span in spans:
        assert span["ts"] >= 0 and span["dur"] >= 0, span
        if span["tid"] != 2:
            args = span["args"]
            assert span["name"] and args["shapes"] and args["layer"], span
            assert {"entry", "index", "value"} <= args.keys(), span
    runs = sorted((e for e in spans if e["tid"] == 2), key=lambda e: e["ts"])
    # A train step runs the layers forward, then backward: the layer of its
    # instructions (the Executable's, not read from names) goes 0, 1, then
    # 1, 0.
    step = next(r for r in runs if r["name"] == "train_step")
    order = [s["args"]["layer"] for s in sorted(
        (s for s in spans if s["tid"] == 0 and
         s["args"]["entry"] == "train_step" and
         step["ts"] <= s["ts"] <= step["ts"] + step["dur"]),
        key=lambda s: s["ts"])]
    changes = [layer for i, layer in enumerate(order)
               if layer.startswith("layer") and
               (i == 0 or order[i - 1] != layer)]
    assert changes[0] == "layer 0" and changes[-1] == "layer 0" and \
        "layer 1" in changes, changes
    compute = [e for e in spans if e["tid"] == 0]
    # Each instruction index of an entry point appears once per run.
    sizes = collections.defaultdict(int)
    for span in compute:
        entry = span["args"]["entry"]
        sizes[entry] = max(sizes[entry], span["args"]["index"] + 1)
    slack = 1e-3  # microseconds of rounding in the trace
    covered = 0
    for r in runs:
        start, end = r["ts"] - slack, r["ts"] + r["dur"] + slack
        inside = [s for s in compute if start <= s["ts"] and
                  s["ts"] + s["dur"] <= end and s["args"]["entry"] == r["name"]]
        indices = sorted(s["args"]["index"] for s in inside)
        assert indices == list(range(sizes[r["name"]])), \
            f"{r['name']} run at {r['ts']}: instructions {indices[:5]}..."
        covered += sum(s["dur"] for s in inside)
    # Nearly all: besides instructions a run only copies its updates back.
    share = covered / sum(r["dur"] for r in runs)
    assert share > 0.9, f"instruction spans cover {share:.1%} of the runs"
    assert len([r for r in runs if r["name"] == "optimizer_step"]) == STEPS
    communication = [e for e in spans if e["tid"] == 1]
    if expect_collectives:
        assert communication, "no spans on the communication track"
        kinds = {s["name"] for s in communication}
        assert kinds <= {"all_gather", "reduce_scatter", "all_reduce",
                         "all_to_all"}, kinds
    return runs, compute


def check_summary(output, runs, compute):
    # The summary leaves out the runs up to the first optimizer step.
    first = next(r for r in runs if r["name"] == "optimizer_step")
    cut = first["ts"] + first["dur"]
    counted = [r for r in runs if r["ts"] >= cut]
    run_seconds = sum(r["dur"] for r in counted) / 1e6
    compute_seconds = sum(s["dur"] for s in compute if s["ts"] >= cut) / 1e6
    found = re.search(r"^profile: .*run\(s\), after the first step: (\S+) ms$",
                      output, re.MULTILINE)
    assert found, output
    total = float(found.group(1)) / 1e3
    # Op kinds: name, calls, ms, share and rate (a layer's row has no rate).
    rows = re.findall(r"^  (\w+)\s+(\d+)\s+(\S+)\s+(\S+)%  \S", output,
                      re.MULTILINE)
    assert rows, output
    kinds = sum(float(ms) for _, _, ms, _ in rows) / 1e3
    outside = float(re.search(r"^  outside instructions\s+(\S+)", output,
                              re.MULTILINE).group(1)) / 1e3
    everything = float(re.search(r"^  all instructions\s+(\S+)", output,
                                 re.MULTILINE).group(1)) / 1e3
    shares = sum(float(share) for *_, share in rows)
    assert abs(kinds + outside - total) <= 0.03 * total, (kinds, outside, total)
    assert abs(total - run_seconds) <= 0.03 * run_seconds, (total, run_seconds)
    assert abs(everything - compute_seconds) <= 0.03 * compute_seconds, \
        (everything, compute_seconds)
    assert abs(shares - 100 * everything / total) < 3, (shares, everything)
    layers = re.findall(r"^  (layer \d+|outside the layers)\s+(\S+)\s+\S+%$",
                        output, re.MULTILINE)
    assert [name for name, _ in layers] == \
        ["outside the layers", "layer 0", "layer 1"], layers
    by_layer = sum(float(ms) for _, ms in layers) / 1e3
    assert abs(by_layer - everything) <= 0.01 * everything, \
        (by_layer, everything)
    return total, kinds, outside


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--bin", "--work", "--config", "--data"):
        parser.add_argument(flag, type=Path, required=True)
    args = parser.parse_args()
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    job = ["train.epochs=1", f"train.max_steps_per_epoch={STEPS}"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    for mesh, ranks in (("1x1", 1), ("1x2", 2)):
        work = args.work / mesh
        work.mkdir(exist_ok=True)
        program = work / "job.twx"
        run([args.bin / "twillc", args.config, *job, "parallel.tp=" + str(ranks),
             f"checkpoint.output_dir={work / 'out'}", "-o", program])
        trace = work / "trace.json"
        command = [args.bin / "twill-train", program, "--data", args.data,
                   f"--profile={trace}"]
        if ranks > 1:
            command = ["mpirun", "-np", ranks, "--oversubscribe", *command]
            trace = work / "trace.rank0.json"
        output = run(command, env=env)
        assert f"profile: trace written to {trace}" in output, output
        runs, compute = check_trace(trace, expect_collectives=ranks > 1)
        if ranks > 1:
            check_trace(work / "trace.rank1.json", expect_collectives=True)
        total, kinds, outside = check_summary(output, runs, compute)
        print(f"{mesh}: {len(compute)} instruction spans in {len(runs)} runs; "
              f"summary {kinds:.4f} s in instructions + {outside:.4f} s "
              f"outside = {total:.4f} s of runs")


if __name__ == "__main__":
    main()
