#!/usr/bin/env bash
# Builds NCCL for Hopper alone, to travel in the device bundle:
#
#   bench/build_nccl.sh SRC OUT   # SRC: NCCL's source, v2.30.7-1 or later
#   TWILL_BUNDLE_NCCL=OUT/lib/libnccl.so.2 bench/device_bundle.sh DIR
#
# Two ranks on one GPU (the device check's nccl part) need NCCL 2.30 or
# later (NCCL_MULTI_RANK_GPU_ENABLE); the device image has 2.28.9, and the
# nvidia-nccl-cu13 wheel's library, built for every architecture, is 199 MB,
# past what a device call carries (64 MiB). Built for sm_90 only, it is a
# sixth of that (33 MB, 31 MB packed). SRC is a checkout of
# github.com/NVIDIA/nccl (or `git archive v2.30.7-1` of one); the build
# takes half an hour on two cores, so it is kept apart from CI, which
# bundles without it.
set -euo pipefail
src=$(cd "${1:?usage: bench/build_nccl.sh SRC OUT}" && pwd)
out=${2:?usage: bench/build_nccl.sh SRC OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
# CUDA 13's include folder holds its own NCCL's headers (2.28), which the
# host compiler would read before the source's: NCCL builds against a
# folder of links to the rest of it.
include=$(mktemp -d)
trap 'rm -rf "$include"' EXIT
for entry in "$cuda"/include/*; do
  case $(basename "$entry") in
  nccl*) ;;
  *) ln -s "$entry" "$include/" ;;
  esac
done
make -C "$src" -j"$(nproc)" src.build BUILDDIR="$out" CUDA_HOME="$cuda" \
    CUDA_INC="$include" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90"
strip --strip-unneeded "$out/lib/libnccl.so.2"
grep -a -o -m1 'NCCL version [0-9][0-9.]*+cuda[0-9.]*' "$out/lib/libnccl.so.2"
du -h "$out/lib/libnccl.so.2"
