#!/usr/bin/env bash
# Sets up, builds and runs every test suite (lit, GoogleTest, ...) under
# ctest, then the fuzz targets (fuzz/run.sh). This is README's test
# command and exactly what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --build build
ctest --test-dir build --output-on-failure -j "$(nproc)"
# Every parser of outside input under libFuzzer, ASan and UBSan, 30 s each.
fuzz/run.sh build-fuzz 30
