#!/usr/bin/env bash
# Compiles every program the device check runs into /tmp/twill-gpu, with a
# built twillc:
#
#   bench/compile_gpu_programs.sh BUILD_BIN
#
# gpu/: the programs of test/gpu/cuda_vs_cpu.py (--compile-only);
# llama8b-SEQ.twx for SEQ 4096 and 16384: a LoRA training step of the
# Llama-3.1-8B shape (random bf16 weights, train.precision=BF16 as in the
# config, LoRA rank 16 on every projection, batch 1, pre-tokenized rows, no
# activation checkpointing, 4 steps, nothing written at the end: the first
# GPU run spent its limit writing the 16 GB random base);
# llama8b-16384-h100.twx: seq 16384 as an H100's 78 GiB holds it (the
# memory budget's choice: SELECTIVE checkpointing); llama8b-chunked-4096
# and llama8b-recompute-4096: llama8b-4096 again, for the device check to
# run with TWILL_CUDA_ATTENTION=chunked and TWILL_ATTENTION_STATISTICS=
# recompute (each its own output folder and lock: the baselines);
# llama8b-long-32768.twx: the long-context transformations at seq 32768 (3
# steps); llama8b-dropout-4096.twx: seq 4096 with LoRA dropout 0.1;
# nccl-MESH-BACKEND.twx: the tiny job on 2x1 and 1x2 for two NCCL ranks on
# one GPU, with a collective timeout of 20 s. Each may run again (a second
# check) over its output folder. Beside each 8B program,
# NAME.report-CARD.txt: its step as twillc's cost estimate predicts it on
# each card the check knows (clusters/h200.textproto, h100.textproto). The
# programs write under /tmp/twill-gpu, so they run on another machine from
# the same path (bench/device_bundle.sh).
set -euo pipefail
bin=${1:?usage: bench/compile_gpu_programs.sh BUILD_BIN}
cd "$(dirname "$0")/.."
work=/tmp/twill-gpu
# Nothing from an earlier compile may be bundled with these programs.
rm -rf "$work"
mkdir -p "$work"
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
"$python" test/gpu/cuda_vs_cpu.py --bin "$bin" --work "$work/gpu" \
    --config configs/tiny.textproto --data data/recall/train.jsonl \
    --compile-only
# Two NCCL ranks on one GPU (the device check's nccl part): the tiny job
# on 2x1 and 1x2, fp32, once for the cuda run and once for the cpu's (each
# its own output folder).
for mesh in 2x1 1x2; do
  for backend in cuda cpu; do
    "$bin/twillc" configs/tiny.textproto model.num_hidden_layers=2 \
        train.seq_len=30 train.batch_size=3 train.epochs=1 \
        train.max_steps_per_epoch=5 parallel.dp=${mesh%x*} \
        parallel.tp=${mesh#*x} parallel.collective_timeout_s=20 \
        checkpoint.output_dir="$work/nccl-$mesh-$backend-out" \
        checkpoint.overwrite_output_dir=true \
        -o "$work/nccl-$mesh-$backend.twx"
  done
done
# No activation checkpointing (the config asks for FULL, for 8 GPUs and seq
# 8192): on one H200 the step's activations fit (a 20 GB arena at seq 4096,
# 78 GB at 16384), and the MFU formula counts no recomputation.
step() { # NAME SEQ [key=value ...]
  local name=$1 seq=$2
  shift 2
  local job=(configs/llama3_1_8b_lora.textproto parallel.tp=1
      checkpoint.random_base=true checkpoint.base_dir=
      checkpoint.output_dir="$work/$name-out" checkpoint.save_every=0
      checkpoint.save_final=false checkpoint.overwrite_output_dir=true
      lora.rank=16 lora.alpha=32
      lora.target_modules=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj
      train.batch_size=1 train.seq_len=$seq
      train.gradient_accumulation_steps=1 train.epochs=1
      train.max_steps_per_epoch=4 data.format=TOKENIZED data.packed=false "$@")
  "$bin/twillc" "${job[@]}" -o "$work/$name.twx"
  for card in h200 h100; do
    "$bin/twillc" "${job[@]}" --report --cluster clusters/$card.textproto \
        > "$work/$name.report-$card.txt"
  done
}
for seq in 4096 16384; do
  step llama8b-$seq $seq parallel.activation_checkpointing=NONE
done
# 80 GB of an H100's 78 GiB (83.8 GB), the rest for CUDA's context, cuDNN's
# and cuBLASLt's workspaces and the chunked kernel's scratch.
step llama8b-16384-h100 16384 parallel.memory_budget_gb=80
# The same step again, for its baselines.
for baseline in chunked recompute; do
  step llama8b-$baseline-4096 4096 parallel.activation_checkpointing=NONE
done
# Long context (issue 17): every transformation that lets one GPU hold a
# long sequence, at a length that still runs in seconds.
step llama8b-long-32768 32768 parallel.activation_checkpointing=FULL \
    parallel.offload_activations=true parallel.mlp_tile_tokens=8192 \
    parallel.attention_tile_tokens=8192 train.max_steps_per_epoch=3
# LoRA dropout (issue 20) on every projection: seq 4096 again, so that the
# check sets its step beside the one without.
step llama8b-dropout-4096 4096 parallel.activation_checkpointing=NONE \
    lora.dropout=0.1
echo "programs in $work"
