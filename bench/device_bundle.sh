#!/usr/bin/env bash
# Packs the GPU check for a GPU machine that has CUDA, Python with PyTorch,
# NumPy and safetensors, but neither Twill's build dependencies nor the
# network (this workplace's device machine):
#
#   bench/device_bundle.sh DIR        # here, after scripts/setup.sh
#   DIR/run.sh OUT_DIR                # there
#
# DIR gets twill-train built without MPI (one rank: TWILL_WITH_MPI=OFF) and
# with LLVM Support and OpenBLAS linked in (TWILL_RUNTIME_ONLY), the few
# shared libraries it needs beyond the C++ runtime and CUDA's, the programs
# of bench/compile_gpu_programs.sh, and the scripts and data the check
# reads. About 35 MB.
set -euo pipefail
dir=${1:?usage: bench/device_bundle.sh DIR}
cd "$(dirname "$0")/.."
repo=$(pwd)
# LLVM Support's CMake package names zstd.
dpkg -s libzstd-dev > /dev/null 2>&1 || apt-get install -y libzstd-dev
ninja -C build twillc
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DTWILL_RUNTIME_ONLY=ON -DTWILL_WITH_MPI=OFF \
    -DLLVM_DIR=/usr/lib/llvm-22/lib/cmake/llvm
ninja -C build-device twill-train
bench/compile_gpu_programs.sh build/bin

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/data/recall" "$dir/test/gpu" "$dir/bench"
cp build-device/bin/twill-train "$dir/bin/"
# What twill-train links beyond libc, libstdc++ and CUDA's libraries.
for lib in libgomp.so.1 libprotobuf.so.32 libpcre2-8.so.0; do
  cp -L "$(ldconfig -p | awk -v l=$lib '$1 == l {print $NF; exit}')" \
      "$dir/lib/"
done
cp -r /tmp/twill-gpu "$dir/programs"
cp data/recall/train.jsonl "$dir/data/recall/"
cp test/gpu/cuda_vs_cpu.py "$dir/test/gpu/"
cp bench/gpu_check.sh "$dir/bench/"
cat > "$dir/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the GPU check from this bundle: DIR/run.sh OUT_DIR.
set -euo pipefail
out=${1:?usage: run.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# CUDA's libraries: the toolkit's, else those PyTorch's wheels bring.
cuda_libs=$(python3 - <<'PY'
import glob, os, site
dirs = ["/usr/local/cuda/lib64"]
for root in site.getsitepackages():
    dirs += glob.glob(os.path.join(root, "nvidia", "*", "lib"))
print(":".join(d for d in dirs if os.path.isdir(d)))
PY
)
export LD_LIBRARY_PATH="$here/lib:$cuda_libs:${LD_LIBRARY_PATH:-}"
rm -rf /tmp/twill-gpu && cp -r "$here/programs" /tmp/twill-gpu
"$here/bench/gpu_check.sh" "$here/bin" "$out"
RUN
chmod +x "$dir/run.sh"
du -sh "$dir"
