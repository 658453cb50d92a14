#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default,
# configs/tiny.textproto. Extra arguments are key=value overrides.
#
# Today Twill resolves and validates the job, prints what will run, and
# prints the model traced into the twill dialect; running it (training,
# adapters) arrives with the next milestones.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --build build --target twillc
build/bin/twillc configs/tiny.textproto "$@" --emit=config
build/bin/twillc configs/tiny.textproto "$@" --emit=mlir
