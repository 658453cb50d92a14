#!/usr/bin/env bash
# Builds the fuzz targets (clang, libFuzzer, ASan+UBSan) in BUILD and runs
# each for SECONDS from its seeds, inputs up to 1 MB: the corpus in the
# repository (fuzz/corpus/<target>/) and, for the Executable loader, the
# tiny job compiled on 1x1 and 2x2 (and with NF4 and FP8 bases) by the main
# build's twillc (TWILLC, default build/bin/twillc; an Executable is a build
# output, so it is made here rather than kept). Fails on the first finding: its log is printed
# and the input that found it is left in BUILD/findings/<target>/ (rerun
# it with BUILD/bin/fuzz-<target> FILE).
#
#   fuzz/run.sh [BUILD [SECONDS]]      (default: build-fuzz, 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build-fuzz}")
seconds=${2:-30}

mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DTWILL_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang-22 \
  -DCMAKE_CXX_COMPILER=clang++-22 > "$build/configure.log" ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build"

twillc=${TWILLC:-$root/build/bin/twillc}
if [ ! -x "$twillc" ]; then
  echo "fuzz/run.sh: no twillc at $twillc to compile the Executable seeds" \
    "(build the main build first, or set TWILLC)" >&2
  exit 1
fi
made="$build/seeds/executable"
mkdir -p "$made"
"$twillc" "$root/configs/tiny.textproto" -o "$made/tiny.twx"
"$twillc" "$root/configs/tiny.textproto" parallel.dp=2 parallel.tp=2 \
  -o "$made/tiny-2x2.twx"
# Quantized bases: bytes, their roles, the dequantize instructions.
"$twillc" "$root/configs/tiny.textproto" parallel.dp=2 parallel.tp=2 \
  quantization.base=NF4 model.intermediate_size=192 -o "$made/tiny-nf4.twx"
# DPO with a precomputed reference: a second entry point, a float input.
"$twillc" "$root/configs/tiny_dpo.textproto" parallel.dp=2 \
  dpo.reference=PRECOMPUTED -o "$made/tiny-dpo-precomputed.twx"
"$twillc" "$root/configs/tiny.textproto" quantization.base=FP8 \
  -o "$made/tiny-fp8.twx"

for binary in "$build"/bin/fuzz-*; do
  target=${binary##*/fuzz-}
  seeds=()
  for folder in "$root/fuzz/corpus/$target" "$build/seeds/$target"; do
    [ -d "$folder" ] && seeds+=("$folder")
  done
  corpus="$build/corpus/$target" findings="$build/findings/$target"
  mkdir -p "$corpus" "$findings"
  log="$build/$target.log"
  # New inputs go to the first folder; the seeds in the repository are
  # only read.
  if ! "$build/bin/fuzz-$target" -max_total_time="$seconds" \
      -max_len=1048576 -timeout=30 -rss_limit_mb=4096 \
      -artifact_prefix="$findings/" -print_final_stats=1 \
      "$corpus" "${seeds[@]}" > "$log" 2>&1; then
    tail -n 80 "$log"
    echo "fuzz-$target: a finding; the input is in $findings/" >&2
    exit 1
  fi
  echo "fuzz-$target: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
    grep -o '[0-9]*$') runs in ${seconds} s, no finding"
done
