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
# DIR.tar.gz (about a third of its size), to travel where size counts;
# there, `tar -xzf DIR.tar.gz` gives DIR back.
#
# DIR gets twill-train and twill-conformance built without MPI (one rank:
# TWILL_WITH_MPI=OFF), with LLVM Support linked in (TWILL_RUNTIME_ONLY)
# and $ORIGIN/../lib as their library path; the few shared libraries they
# need beyond glibc, libstdc++ and CUDA's (oneDNN among them), in lib/;
# the programs of bench/compile_gpu_programs.sh; and the scripts and data
# the check reads. bench/check_bundle.sh DIR proves it self-contained.
# Where TWILL_BUNDLE_NCCL names a libnccl.so.2 (bench/build_nccl.sh: 2.30
# or later, for two ranks on one GPU), it goes to lib/nccl, which run.sh
# puts before the image's NCCL.
set -euo pipefail
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
cp bench/device_check.py "$dir/bench/"
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
# The NCCL the bundle brings, where it brings one, before the image's
# (for Twill's ranks; the check's PyTorch part takes it off again).
if [ -d "$here/lib/nccl" ]; then
  export TWILL_BUNDLED_NCCL="$here/lib/nccl"
  export LD_LIBRARY_PATH="$TWILL_BUNDLED_NCCL:$LD_LIBRARY_PATH"
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
    --out "$out" "$@"
RUN
chmod +x "$dir/run.sh"
strip "$dir"/bin/*
tar -czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
du -sh "$dir" "$dir.tar.gz"
# A device call carries at most 64 MiB.
if [ "$(stat -c %s "$dir.tar.gz")" -gt $((64 << 20)) ]; then
  echo "device_bundle: $dir.tar.gz is past the 64 MiB a device call carries" >&2
fi
