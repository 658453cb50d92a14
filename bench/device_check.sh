#!/usr/bin/env bash
# The GPU check of the cuda backend, in one run on a machine with an H100 or
# H200 (Debian/Ubuntu with the CUDA toolkit and the network):
#
#   bench/device_check.sh OUT_DIR
#
# Sets up and builds (scripts/setup.sh), compiles the programs
# (bench/compile_gpu_programs.sh), then runs bench/gpu_check.sh: the GPU
# tests, then the timed Llama-3.1-8B LoRA step; its log and results table
# land in OUT_DIR. A GPU machine without the compiler's dependencies (or
# without the network) runs the same check from bench/device_bundle.sh.
set -euo pipefail
out=${1:?usage: bench/device_check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
scripts/setup.sh
ninja -C build
bench/compile_gpu_programs.sh build/bin
bench/gpu_check.sh build/bin "$out"
