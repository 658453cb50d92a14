#!/usr/bin/env bash
# Proves a device bundle (bench/device_bundle.sh DIR) self-contained:
#
#   bench/check_bundle.sh DIR [PYTHON]
#
# 1. every shared library that its programs and libraries need resolves
#    inside DIR, or is one a CUDA machine's image has anyway: glibc's,
#    libstdc++ and libgcc_s, CUDA's (the driver, the runtime, cuBLAS,
#    NCCL);
# 2. its cpu parts run from it with an empty environment: the conformance
#    harness against the cpu backend, a 20-step training run of the tiny
#    job, and the cuda conformance saying it is skipped (no GPU here);
# 3. a dry run of the device check (DIR/run.sh, with PYTHON, default
#    python3, as the device machine's python3: it needs NumPy and
#    safetensors) at its default deadline: its plan, each part's limit,
#    leaves room for a rerun; it starts every default part, each says
#    SKIPPED within seconds, and its output folder holds at most 8 files,
#    results.md among them.
# Exits 1 at the first thing that is not so.
set -euo pipefail
dir=$(cd "${1:?usage: bench/check_bundle.sh DIR [PYTHON]}" && pwd)
python=$(command -v "${2:-python3}")
system='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|libstdc\+\+\.so\.6|libcuda\.so\.1|libcudart\.so\.[0-9]+|libcublas\.so\.[0-9]+|libcublasLt\.so\.[0-9]+|libnccl\.so\.[0-9]+|libcudnn\.so\.[0-9]+|libnvrtc\.so\.[0-9]+)$'
status=0
# The programs find lib/ through their run path ($ORIGIN/../lib); the
# libraries there are loaded by them, so theirs is lib/ too.
while read -r file; do
  search=
  [[ "$file" == "$dir"/lib/* ]] && search="LD_LIBRARY_PATH=$dir/lib"
  while read -r name arrow path rest; do
    # A library that needs none (ICU's data) is "statically linked".
    [ "$name" = statically ] && continue
    [ "$arrow" = "=>" ] || { path=$name; name=$(basename "$name"); }
    if [[ "$path" == "$dir"/* ]]; then
      continue
    elif [[ "$name" =~ $system ]]; then
      continue
    fi
    echo "check_bundle: $(basename "$file") needs $name ($path), which is neither in the bundle nor a system or CUDA library"
    status=1
  done < <(env -i $search ldd "$file" | sed 's/(0x[0-9a-f]*)//')
done < <(find "$dir/bin" "$dir/lib" -type f)
[ $status = 0 ] || exit 1
echo "check_bundle: every library resolves inside the bundle or to glibc, libstdc++ or CUDA"
if [ -f "$dir/lib/nccl/libnccl.so.2" ]; then
  echo "check_bundle: it brings $(grep -a -o -m1 'NCCL version [0-9][0-9.]*+cuda[0-9.]*' "$dir/lib/nccl/libnccl.so.2")"
fi

env -i "$dir/bin/twill-conformance" --backend=cpu > /tmp/check_bundle.txt ||
  { tail -3 /tmp/check_bundle.txt; echo "check_bundle: the cpu conformance failed"; exit 1; }
tail -1 /tmp/check_bundle.txt
env -i "$dir/bin/twill-train" "$dir/programs/gpu/train.twx" \
    --data "$dir/data/recall/train.jsonl" > /tmp/check_bundle.txt ||
  { tail -3 /tmp/check_bundle.txt; echo "check_bundle: cpu training failed"; exit 1; }
grep "^trained" /tmp/check_bundle.txt
set +e
env -i "$dir/bin/twill-conformance" --backend=cuda > /dev/null 2>&1
code=$?
set -e
[ $code = 77 ] || { echo "check_bundle: the cuda conformance exited $code, not 77 (skipped)"; exit 1; }
echo "check_bundle: with an empty environment the cpu parts run, and the cuda conformance is skipped (77) without a GPU"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
began=$SECONDS
env -i HOME="$out" PATH="$(dirname "$python"):/usr/bin:/bin" \
    "$dir/run.sh" "$out/check" --work "$out/parts" \
    > "$out/run.txt" 2>&1 ||
  { tail -5 "$out/run.txt"; echo "check_bundle: the dry run failed"; exit 1; }
seconds=$((SECONDS - began))
files=$(find "$out/check" -type f | wc -l)
[ "$files" -le 8 ] && [ -f "$out/check/results.md" ] ||
  { ls -R "$out/check"; echo "check_bundle: the dry run left $files files, or no results.md"; exit 1; }
rows=$(grep -c '^| [^w-]' "$out/check/results.md")
unskipped=$(grep '^| [^w-]' "$out/check/results.md" | grep -v 'wall time' |
    grep -vc 'SKIPPED' || true)
[ "$rows" -ge 9 ] && [ "$unskipped" = 0 ] && [ $seconds -lt 60 ] ||
  { cat "$out/check/results.md"; echo "check_bundle: in the dry run ($seconds s), a part did not say SKIPPED"; exit 1; }
plan=$(grep -m1 '^Card ' "$out/check/results.md" || true)
[[ "$plan" == *"room for one rerun"* ]] ||
  { echo "$plan"; echo "check_bundle: the plan leaves no room for a rerun within the default deadline"; exit 1; }
echo "check_bundle: $plan"
echo "check_bundle: the dry run started every part ($rows rows), each said SKIPPED (no GPU), in $seconds s, leaving $files files"
