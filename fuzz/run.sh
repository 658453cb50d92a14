#!/usr/bin/env bash
# Builds the fuzz targets (clang, libFuzzer, ASan+UBSan) in BUILD and runs
# each for SECONDS from its seed corpus (fuzz/corpus/<target>/), inputs up
# to 1 MB. Fails on the first finding: its log is printed and the input
# that found it is left in BUILD/findings/<target>/ (rerun it with
# BUILD/bin/fuzz-<target> FILE).
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

for seeds in "$root"/fuzz/corpus/*/; do
  target=$(basename "$seeds")
  corpus="$build/corpus/$target" findings="$build/findings/$target"
  mkdir -p "$corpus" "$findings"
  log="$build/$target.log"
  # New inputs go to the first folder; the seeds in the repository are
  # only read.
  if ! "$build/bin/fuzz-$target" -max_total_time="$seconds" \
      -max_len=1048576 -timeout=30 -rss_limit_mb=4096 \
      -artifact_prefix="$findings/" -print_final_stats=1 \
      "$corpus" "$seeds" > "$log" 2>&1; then
    tail -n 80 "$log"
    echo "fuzz-$target: a finding; the input is in $findings/" >&2
    exit 1
  fi
  echo "fuzz-$target: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
    grep -o '[0-9]*$') runs in ${seconds} s, no finding"
done
