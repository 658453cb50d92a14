#!/usr/bin/env bash
# Sets up, builds and runs the main job on the embedded default,
# configs/tiny.textproto. Extra arguments are key=value overrides.
#
# Today Twill resolves and validates the job and prints what will run;
# tracing, training and adapters arrive with the next issues.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --build build --target twillc
build/bin/twillc configs/tiny.textproto "$@" --emit=config
