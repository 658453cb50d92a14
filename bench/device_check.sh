#!/usr/bin/env bash
# The device check on a GPU machine that can build Twill (Debian/Ubuntu with
# the CUDA toolkit and the network):
#
#   bench/device_check.sh OUT_DIR [--deadline SECONDS]
#
# Sets up and builds (scripts/setup.sh), compiles the programs
# (bench/compile_gpu_programs.sh), then runs bench/device_check.py: the
# conformance of every instruction, the GPU tests, the timed Llama-3.1-8B
# LoRA steps; its files land in OUT_DIR. A GPU machine without the
# compiler's dependencies or the network runs the same check from
# bench/device_bundle.sh.
set -euo pipefail
out=${1:?usage: bench/device_check.sh OUT_DIR}
# A flag first would be taken for OUT_DIR (and by mkdir for an option of
# its own); bench/device_check.py checks the rest, after the build.
case $out in
-*) echo "usage: bench/device_check.sh OUT_DIR [--deadline SECONDS]: OUT_DIR comes first, not $out" >&2
    exit 2;;
esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
scripts/setup.sh
ninja -C build
bench/compile_gpu_programs.sh build/bin
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
"$python" bench/device_check.py --bin build/bin --out "$out" "${@:2}"
