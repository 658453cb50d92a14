#!/usr/bin/env bash
# Builds NCCL for Hopper alone, to travel in the device bundle:
#
#   bench/build_nccl.sh SRC OUT   # SRC: NCCL's source, v2.30.7-1 or later
#   TWILL_BUNDLE_NCCL=OUT/lib/libnccl.so.2 bench/device_bundle.sh DIR
#
# Two ranks on one GPU (the device check's nccl part) need NCCL 2.30 or
# later (NCCL_MULTI_RANK_GPU_ENABLE); the device image has 2.28.9, and the
# nvidia-nccl-cu13 wheel's library, built for every architecture, is 199 MB,
# past what a device call carries (64 MiB). Built for sm_90 only, and
# with the device kernels of the collectives Twill calls alone (ONLY_FUNCS
# below), it is 14 MB, 11.5 MB xz-packed (33 MB with every kernel). SRC
# is a checkout of github.com/NVIDIA/nccl (or `git archive v2.30.7-1` of
# one); the build takes 24 minutes of a core's time (39 on two busy cores),
# so it is kept apart from CI, which bundles without it and counts the
# library's packed size (bench/device_bundle.sh).
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
# The kernels of what CudaCollectives and NcclComm call: send/receive
# (all_to_all), all-gather, and all-reduce and reduce-scatter summing (and
# max: the vocab-parallel loss's rows) the dtypes ncclTypeOf names (u8,
# i32, i64, f32, bf16) and f64 (the loss's rows). NCCL replaces a call it
# has no kernel for by one that does nothing (src/device/generate.py), so
# anything else would be wrong in silence: the nccl part, which compares
# each loss with the cpu's, is the check.
only_funcs="(SendRecv|(Broadcast|AllGather|AllGatherV) * *|(AllReduce|ReduceScatter) (Sum|MinMax) (u8|i32|i64|f32|f64|bf16) * *)"
make -C "$src" -j"$(nproc)" src.build BUILDDIR="$out" CUDA_HOME="$cuda" \
    CUDA_INC="$include" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    ONLY_FUNCS="$only_funcs"
strip --strip-unneeded "$out/lib/libnccl.so.2"
grep -a -o -m1 'NCCL version [0-9][0-9.]*+cuda[0-9.]*' "$out/lib/libnccl.so.2"
du -hL "$out/lib/libnccl.so.2"
