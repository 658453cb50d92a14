#!/usr/bin/env bash
# Sets up, builds and runs every test suite (lit, GoogleTest, ...) under
# ctest. This is README's test command and exactly what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake --build build
ctest --test-dir build --output-on-failure -j "$(nproc)"
