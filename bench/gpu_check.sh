#!/usr/bin/env bash
# The GPU part of the device check, given a twill-train built with CUDA and
# the programs of bench/compile_gpu_programs.sh in /tmp/twill-gpu:
#
#   bench/gpu_check.sh BIN OUT_DIR
#
# 1. the GPU tests: every kernel through one train step (fp32 and bf16, LoRA
#    and full fine-tuning) and 20 training steps against the cpu backend
#    (test/gpu/cuda_vs_cpu.py);
# 2. times LoRA training steps of the Llama-3.1-8B shape (3 steps after one
#    warm-up step) and reports tokens/s, MFU against 989 TFLOP/s and against
#    the bf16 cuBLAS peak measured here (8192^3 through PyTorch), and the
#    peak GPU memory;
# 3. writes its log and a results table (results.md) into OUT_DIR and prints
#    the table last.
#
# MFU counts LoRA training FLOPs per token as 4N + 12 L d T (N non-embedding
# parameters, L layers, d hidden size, T sequence length): the forward 2N,
# the backward through frozen weights 2N (no weight gradients), attention
# 12 L d T.
set -euo pipefail
bin=${1:?usage: bench/gpu_check.sh BIN OUT_DIR}
out=${2:?usage: bench/gpu_check.sh BIN OUT_DIR}
bin=$(cd "$bin" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
exec > >(tee "$out/device_check.log") 2>&1
work=/tmp/twill-gpu
seq_len=4096

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
# The oracles' Python where scripts/setup.sh made it; the timing needs a
# CUDA PyTorch (python3's on a GPU machine).
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
"$python" test/gpu/cuda_vs_cpu.py --bin "$bin" --work "$work/gpu" \
    --data data/recall/train.jsonl --precompiled

python3 - "$work/data.jsonl" "$seq_len" <<'PY'
import json, random, sys
random.seed(0)
with open(sys.argv[1], "w") as f:
    for _ in range(8):
        ids = [random.randrange(128000) for _ in range(int(sys.argv[2]))]
        f.write(json.dumps({"input_ids": ids}) + "\n")
PY

# Peak GPU memory: sampled while the job runs.
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
    > "$work/memory.txt" &
sampler=$!
"$bin/twill-train" "$work/llama8b.twx" --backend=cuda --data "$work/data.jsonl"
kill $sampler

python3 - "$work" "$out" "$seq_len" <<'PY'
import json, sys, time
from pathlib import Path
import torch

work, out, seq = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
steps = [json.loads(l) for l in (work / "llama8b-out/metrics.jsonl").read_text().splitlines()]
timed = steps[1:]  # the first step warms up
tokens_per_second = sum(s["tokens_per_second"] for s in timed) / len(timed)

# Llama-3.1-8B: L=32, d=4096, MLP 14336, 8 KV heads of 128.
L, d, ffn, kv = 32, 4096, 14336, 1024
# Non-embedding parameters: q, o (d x d), k, v (d x kv), gate, up, down.
N = L * (2 * d * d + 2 * d * kv + 3 * d * ffn)
flops_per_token = 4 * N + 12 * L * d * seq
achieved = tokens_per_second * flops_per_token

a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
start = time.perf_counter()
for _ in range(10):
    a @ b
torch.cuda.synchronize()
cublas_peak = 10 * 2 * 8192**3 / (time.perf_counter() - start)

memory = max(int(x) for x in (work / "memory.txt").read_text().split() if x.strip())
rows = [
    ("job", f"Llama-3.1-8B shape, LoRA r16 all projections, seq {seq}, 1 GPU, cuda backend, bf16 (fp32 LoRA masters), no activation checkpointing"),
    ("tokens/s (mean of steps 2-4)", f"{tokens_per_second:,.0f}"),
    ("target / goal", "12,500 / 15,000 tokens/s"),
    ("FLOPs per token (4N + 12 L d T)", f"{flops_per_token:.3e}"),
    ("MFU vs 989 TFLOP/s", f"{achieved / 989e12:.1%}"),
    ("bf16 cuBLAS peak measured (8192^3)", f"{cublas_peak / 1e12:.0f} TFLOP/s"),
    ("MFU vs measured cuBLAS peak", f"{achieved / cublas_peak:.1%}"),
    ("peak GPU memory", f"{memory / 1024:.1f} GiB"),
]
table = "| what | measured |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
(out / "results.md").write_text(table + "\n")
print(table)
PY
