#!/usr/bin/env bash
# Installs everything Twill needs on Debian 12 and configures the build in
# build/. Idempotent: a second run only checks, installs nothing new, and
# leaves an existing build alone.
#
#   Debian packages   the toolchain, MLIR/LLVM 22, protobuf, GoogleTest,
#                     OpenMPI, oneDNN, PCRE2, ICU, clang 22 for the fuzz
#                     targets, Slurm and munge for the launcher's test
#                     (CUDA is used if present)
#   Python (.venv)    the test oracles: torch, transformers, peft,
#                     safetensors, tiktoken, llama-models, tensorboard (its
#                     reader checks the event files twill-train writes),
#                     sentencepiece and mistral-common (Mistral's real
#                     tokenizer, converted by transformers), bitsandbytes
#                     (NF4) and trl (DPO's preference data); and
#                     cudnn-frontend, whose header-only C++ graph API the
#                     cuda backend's fused attention is built on
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache git python3 python3-venv
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libprotobuf-dev protobuf-compiler libgtest-dev libgmock-dev
  libopenmpi-dev openmpi-bin libdnnl-dev libpcre2-dev libicu-dev
  libzstd-dev  # LLVM Support's CMake package names it (the device bundle)
  clang-22 libclang-rt-22-dev  # the fuzz targets (fuzz/run.sh): libFuzzer, ASan
  slurm-wlm munge  # twill train under Slurm: its test starts a one-node cluster
  procps  # pgrep: the robustness tests look for ranks left behind
)
# trl is pinned: oracle.preference_data calls its DPOTrainer's own
# preprocessing (_prepare_dataset), which is no public API.
PYTHON_PACKAGES=(torch transformers peft safetensors tiktoken llama-models
  tensorboard sentencepiece mistral-common bitsandbytes "trl==1.16.0")
PYTHON_MODULES="torch, transformers, peft, safetensors, tiktoken, llama_models, tensorboard, sentencepiece, mistral_common, bitsandbytes, trl"

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
    grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

# The oracles live in a virtual environment that can see packages the
# machine's Python already has, so nothing is downloaded twice.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python -c "import $PYTHON_MODULES" 2>/dev/null; then
  echo "setup: installing Python packages: ${PYTHON_PACKAGES[*]}"
  .venv/bin/python -m pip install -q "${PYTHON_PACKAGES[@]}"
fi

# Pinned: the cuda backend compiles against its headers (include/ in the
# wheel); its Python bindings are not used, so nothing else comes with it.
CUDNN_FRONTEND="nvidia-cudnn-frontend==1.32.0"
if ! .venv/bin/python -m pip show "${CUDNN_FRONTEND%%==*}" 2>/dev/null |
    grep -qx "Version: ${CUDNN_FRONTEND##*==}"; then
  echo "setup: installing $CUDNN_FRONTEND (headers for the cuda backend)"
  .venv/bin/python -m pip install -q --no-deps "$CUDNN_FRONTEND"
fi

if [ ! -f build/CMakeCache.txt ]; then
  cmake -G Ninja -S . -B build \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DTWILL_PYTHON="$PWD/.venv/bin/python"
fi
