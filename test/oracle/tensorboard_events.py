"""TensorBoard reads what Twill writes (issue 18).

    python tensorboard_events.py --bin BUILD/bin --work DIR

Trains the tiny job for 10 steps, one of them without a labelled token,
with train.tensorboard_dir set, then reads the event file back with
TensorBoard's own reader (EventAccumulator, which checks every record's
CRC) and compares each scalar, step by step, with metrics.jsonl: the loss,
lr, gradient norm, tokens/s and peak memory of every step that updated,
and the labelled tokens of every step.
"""
import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator)

REPO = Path(__file__).resolve().parents[2]
STEPS, ROWS = 10, 4  # the tiny job's batch_size
UNLABELLED_STEP = 4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work = args.work / "tensorboard"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    # The recall examples, one a row (unpacked), those of one step
    # unlabelled.
    rows = [json.loads(line) for line in
            (REPO / "data/recall/train.jsonl").read_text().splitlines()]
    data = work / "train.jsonl"
    with open(data, "w") as f:
        for index, row in enumerate(rows[:STEPS * ROWS]):
            if index // ROWS == UNLABELLED_STEP - 1:
                row = {"input_ids": row["input_ids"],
                       "labels": [-100] * len(row["input_ids"])}
            f.write(json.dumps(row) + "\n")
    subprocess.run([args.bin / "twillc", REPO / "configs/tiny.textproto",
                    "model.num_hidden_layers=1", "train.epochs=1",
                    f"train.max_steps_per_epoch={STEPS}", "data.packed=false", "data.shuffle=false",
                    f"data.path={data}", f"checkpoint.output_dir={work / 'out'}",
                    f"train.tensorboard_dir={work / 'tb'}",
                    "-o", work / "job.twx"], check=True)
    subprocess.run([args.bin / "twill-train", work / "job.twx"], check=True,
                   stdout=subprocess.DEVNULL)

    metrics = [json.loads(line) for line in
               (work / "out" / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(work / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    expected = {"loss": "train/loss", "lr": "train/lr",
                "grad_norm": "train/grad_norm",
                "tokens_per_second": "train/tokens_per_second",
                "tokens": "train/labelled_tokens"}
    ok = tags == set(expected.values()) | {"train/peak_memory_gib"}
    print(f"scalars: {sorted(tags)}")
    for field, tag in expected.items():
        written = {e.step: e.value for e in events.Scalars(tag)} \
            if tag in tags else {}
        want = {m["step"]: m[field] for m in metrics if field in m}
        same = written.keys() == want.keys() and all(
            abs(written[s] - v) <= 1e-6 * max(1.0, abs(v))
            for s, v in want.items())
        ok = ok and same and len(want) > 0
        print(f"{tag}: steps {sorted(written)} "
              f"{'match' if same else 'DIFFER from'} metrics.jsonl")
    memory = {e.step: e.value for e in events.Scalars("train/peak_memory_gib")}
    want = {m["step"]: m["peak_memory_bytes"] / 2**30 for m in metrics
            if "peak_memory_bytes" in m}
    same = memory.keys() == want.keys() and all(
        abs(memory[s] - v) <= 1e-6 * v for s, v in want.items())
    ok = ok and same
    print(f"train/peak_memory_gib: {'match' if same else 'DIFFER'}")
    skipped = [m["step"] for m in metrics if m.get("skipped")]
    ok = ok and len(metrics) == STEPS and skipped == [UNLABELLED_STEP]
    print(f"{len(metrics)} steps, skipped (no labelled token): {skipped}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
