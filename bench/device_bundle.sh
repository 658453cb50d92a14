#!/usr/bin/env bash
# Packs the device check for a GPU machine that has CUDA and Python with
# PyTorch, NumPy and safetensors, but neither Twill's build dependencies nor
# the network (this workplace's device machine):
#
#   bench/device_bundle.sh DIR [BUILD]   # here, after scripts/setup.sh
#   DIR/run.sh OUT_DIR [--deadline S]    # there: bench/device_check.py
#
# BUILD is the configured build folder (default build/: scripts/setup.sh's);
# the runtime-only build goes to BUILD/device. It also packs DIR as
# DIR.tar.xz, to travel where size counts; there, `tar -xJf DIR.tar.xz`
# gives DIR back.
#
# DIR gets twill-train and twill-conformance built without MPI (one rank:
# TWILL_WITH_MPI=OFF), with LLVM Support linked in (TWILL_RUNTIME_ONLY)
# and $ORIGIN/../lib as their library path, stripped; the few shared
# libraries they need beyond glibc, libstdc++ and CUDA's (oneDNN among
# them), in lib/; the programs of bench/compile_gpu_programs.sh; the cards'
# cluster files; and the scripts and data the check reads.
# bench/check_bundle.sh DIR proves it self-contained. Where
# TWILL_BUNDLE_NCCL names a libnccl.so.2 (bench/build_nccl.sh: 2.30 or
# later, for two ranks on one GPU), it goes to lib/nccl, which run.sh names
# to the check's nccl part alone (the rest runs on the image's NCCL).
#
# A device call carries the working tree (what git tracks, and files it
# does not ignore) and the bundle, 64 MiB together: the two must leave
# 8 MB of it free (at most 59 MB), or this fails. Without an NCCL of its
# own (CI's bundle), the NCCL it would carry counts as NCCL_PACKED_BYTES,
# bench/build_nccl.sh's library as measured xz-packed.
set -euo pipefail
# 64 MiB a call, less 8 MB kept free for what the next features add.
LIMIT_BYTES=59000000
# bench/build_nccl.sh's libnccl.so.2 (2.30.7, sm_90, Twill's collectives:
# 14,225,440 B), xz -9 packed, as measured when it was built.
NCCL_PACKED_BYTES=11482924
dir=${1:?usage: bench/device_bundle.sh DIR [BUILD]}
build=$(cd "${2:-build}" && pwd)
mkdir -p "$(dirname "$dir")"
dir=$(cd "$(dirname "$dir")" && pwd)/$(basename "$dir")
cd "$(dirname "$0")/.."
ninja -C "$build" twillc
cmake -S . -B "$build/device" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTWILL_RUNTIME_ONLY=ON -DTWILL_WITH_MPI=OFF \
    -DLLVM_DIR=/usr/lib/llvm-22/lib/cmake/llvm > /dev/null
ninja -C "$build/device" twill-train twill-conformance
bench/compile_gpu_programs.sh "$build/bin"

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/data/recall" "$dir/test/gpu" "$dir/bench"
cp "$build/device/bin/twill-train" "$build/device/bin/twill-conformance" \
    "$dir/bin/"
# What they link beyond glibc, libstdc++ and CUDA's libraries.
# ICU (the tokenizers' Unicode normalization) by the sonames it names.
for lib in libgomp.so.1 libprotobuf.so.32 libpcre2-8.so.0 libz.so.1 \
    libdnnl.so.2 libOpenCL.so.1 \
    $(ldd "$dir/bin/twill-train" | awk '$1 ~ /^libicu/ {print $1}'); do
  cp -L "$(ldconfig -p | awk -v l=$lib '$1 == l {print $NF; exit}')" \
      "$dir/lib/"
done
if [ -n "${TWILL_BUNDLE_NCCL:-}" ]; then
  mkdir -p "$dir/lib/nccl"
  cp -L "$TWILL_BUNDLE_NCCL" "$dir/lib/nccl/libnccl.so.2"
fi
cp -r /tmp/twill-gpu "$dir/programs"
cp data/recall/train.jsonl "$dir/data/recall/"
cp test/gpu/cuda_vs_cpu.py "$dir/test/gpu/"
cp bench/device_check.py bench/device_parts.py "$dir/bench/"
mkdir -p "$dir/clusters"
cp clusters/h200.textproto clusters/h100.textproto "$dir/clusters/"
cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the device check from this bundle: DIR/run.sh OUT_DIR [--deadline S]
# (bench/device_check.py's flags).
set -euo pipefail
out=${1:?usage: run.sh OUT_DIR [--deadline SECONDS]}
# A flag first would be taken for OUT_DIR; device_check.py checks the rest.
case $out in
-*) echo "usage: run.sh OUT_DIR [--deadline SECONDS]: OUT_DIR comes first, not $out" >&2
    exit 2;;
esac
shift
here=$(cd "$(dirname "$0")" && pwd)
# CUDA's libraries: the toolkit's, else those PyTorch's wheels bring.
cuda_libs=$(python3 - <<'PY'
import glob, os, site
dirs = ["/usr/local/cuda/lib64"]
for root in site.getsitepackages():
    dirs += glob.glob(os.path.join(root, "nvidia", "*", "lib"))
    dirs += glob.glob(os.path.join(root, "nvidia", "cu13", "lib"))
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
)
export LD_LIBRARY_PATH="$cuda_libs:${LD_LIBRARY_PATH:-}"
# The NCCL the bundle brings, where it brings one: the nccl part puts it
# first on its ranks' library path; every other part runs the image's.
if [ -d "$here/lib/nccl" ]; then
  export TWILL_BUNDLED_NCCL="$here/lib/nccl"
fi
# NCCL says what goes wrong, and bootstraps over an interface that exists
# (one machine: the loopback where there is one).
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if [ -z "${NCCL_SOCKET_IFNAME:-}" ]; then
  NCCL_SOCKET_IFNAME=$(python3 -c '
import socket
names = [name for _, name in socket.if_nameindex()]
print("lo" if "lo" in names else (names or [""])[0])' || true)
  [ -n "$NCCL_SOCKET_IFNAME" ] && export NCCL_SOCKET_IFNAME
fi
# The programs write under the path they were compiled for.
rm -rf /tmp/twill-gpu && cp -r "$here/programs" /tmp/twill-gpu
exec python3 "$here/bench/device_check.py" --bin "$here/bin" \
    --tests "$here/test/gpu" --data "$here/data/recall/train.jsonl" \
    --clusters "$here/clusters" --out "$out" "$@"
RUN
chmod +x "$dir/run.sh"
strip "$dir"/bin/*
# xz packs the programs and libraries a fifth tighter than gzip.
XZ_OPT=-9 tar -cJf "$dir.tar.xz" -C "$(dirname "$dir")" "$(basename "$dir")"
du -sh "$dir" "$dir.tar.xz"
# What a device call carries with it: the working tree's files.
tree=$(git ls-files -z --cached --others --exclude-standard |
    xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
bundle=$(stat -c %s "$dir.tar.xz")
nccl=0 note=""
if [ ! -f "$dir/lib/nccl/libnccl.so.2" ]; then
  nccl=$NCCL_PACKED_BYTES
  note=" + $nccl B for the NCCL it does not bring"
fi
total=$((tree + bundle + nccl))
echo "device_bundle: the bundle $bundle B + the working tree $tree B$note" \
    "= $total B of the $LIMIT_BYTES B a device call may carry and keep 8 MB" \
    "free"
if [ "$total" -gt "$LIMIT_BYTES" ]; then
  echo "device_bundle: $total B is past $LIMIT_BYTES B: pack less" >&2
  exit 1
fi
