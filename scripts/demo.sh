#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default: the tiny
# Llama of configs/tiny.textproto learns the key-value pairs of data/recall
# with LoRA on the CPU. Prints the loss per step, the next-token accuracy on
# held-out examples before and after, and where the PEFT adapter went.
# Extra arguments are key=value overrides of the job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --build build --target twillc twill-train
mkdir -p output
# Each run of the demo starts over (its earlier adapter replaced).
build/bin/twillc configs/tiny.textproto checkpoint.overwrite_output_dir=true \
    "$@" -o output/tiny.twx
build/bin/twill-train output/tiny.twx --eval-data data/recall/eval.jsonl
