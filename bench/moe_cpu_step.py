"""One LoRA training step of a mixture of experts on the cpu: Twill's cpu
backend against transformers + PEFT + torch.optim.AdamW, eager and under
torch.compile, the same model, batch and thread count, all measured in this
one run.

    python bench/moe_cpu_step.py BUILD/bin [--experts few|many]
                                 [--threads 2] [--steps 6] [--repeats 3]
                                 [--markdown FILE]

The model: Qwen3-MoE, hidden 512, 4 layers, 8 query / 2 KV heads of 64,
vocab 8192, fp32, its experts (EXPERTS) 8 of 384 with 2 a token, or 64 of
128 with 8 a token (their weights normalised); LoRA rank 8 (alpha 16) on
q, k, v, o, the router and both expert weights (PEFT's
target_parameters); batch 2 x seq 512 of random tokens. A step is
forward, backward, clipping and AdamW. PyTorch runs transformers' default
experts implementation and attention (`--implementation` picks another
experts implementation), eager, then the same model under torch.compile
(its compilation is in the first steps, which are dropped with the first
`--warmup` steps of every side). The sides take turns, `--repeats` times
each, each in a fresh process; the median of every kept step of a side is
reported, and each PyTorch side's step over Twill's (the issue's goal: at
least 2 against eager).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# cpu_step's data and job are this model's: its vocab, sequence length,
# batch and LoRA rank.
from cpu_step import (ALPHA, BATCH, RANK, SEQ, cpu_name, job, step_times,
                      thread_env, torch_version, write_data)

MODEL = dict(model_type="qwen3_moe", vocab_size=8192, hidden_size=512,
             num_hidden_layers=4, num_attention_heads=8,
             num_key_value_heads=2, head_dim=64, norm_topk_prob=True,
             intermediate_size=1536, rms_norm_eps=1e-6, rope_theta=1000000.0,
             max_position_embeddings=1024, tie_word_embeddings=False)
# The experts, as two families size them: few and large, 2 a token
# (Mixtral's 8), or many and small, 8 a token (Qwen3-30B-A3B's 128 of 768
# for hidden 2048, here 64 of 128 for hidden 512).
EXPERTS = {"few": dict(num_experts=8, num_experts_per_tok=2,
                       moe_intermediate_size=384),
           "many": dict(num_experts=64, num_experts_per_tok=8,
                        moe_intermediate_size=128)}
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate"]
PARAMETERS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]


def twill_steps(bin_dir, work, name, threads, steps, experts):
    """Step times (s) of a Twill run."""
    out, program = work / name, work / f"{name}.twx"
    (work / "job.textproto").write_text(
        job(steps, out, {**MODEL, **EXPERTS[experts]}, MODULES, PARAMETERS))
    subprocess.run([bin_dir / "twillc", work / "job.textproto", "-o", program],
                   check=True)
    run = subprocess.run([bin_dir / "twill-train", program, "--data",
                          work / "data.jsonl"], env=thread_env(threads),
                         capture_output=True, text=True)
    if run.returncode:
        sys.exit(run.stderr)
    return step_times(out)


PYTORCH_STEPS = """
import sys, time, json, torch
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
from peft import LoraConfig, get_peft_model
(threads, steps, compiled, implementation, model_args, modules, parameters,
 batch, seq, rank, alpha) = json.loads(sys.argv[1])
torch.set_num_threads(threads)
torch.manual_seed(0)
model_args = {k: v for k, v in model_args.items() if k != "model_type"}
config = Qwen3MoeConfig(**model_args)
if implementation:
    config._experts_implementation = implementation
model = Qwen3MoeForCausalLM(config)
model = get_peft_model(model, LoraConfig(
    r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules=modules,
    target_parameters=parameters))
model.train()
trainable = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(trainable, lr=1e-4, weight_decay=0.0)
forward = torch.compile(model) if compiled else model
ids = torch.randint(0, model_args["vocab_size"], (batch, seq))
times = []
for _ in range(steps):
    start = time.perf_counter()
    loss = forward(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    optimizer.step()
    optimizer.zero_grad()
    times.append(time.perf_counter() - start)
print(json.dumps({"times": times,
                  "experts": model.config._experts_implementation}))
"""


def pytorch_steps(threads, steps, compiled, implementation, experts):
    arguments = json.dumps([threads, steps, compiled, implementation,
                            {**MODEL, **EXPERTS[experts]}, MODULES,
                            PARAMETERS, BATCH, SEQ, RANK, ALPHA])
    run = subprocess.run([sys.executable, "-c", PYTORCH_STEPS, arguments],
                         env=thread_env(threads), capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(run.stderr[-4000:])
    result = json.loads(run.stdout.strip().splitlines()[-1])
    return result["times"], result["experts"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--experts", choices=sorted(EXPERTS), default="few")
    parser.add_argument("--implementation", default="",
                        help="transformers' experts implementation (default: "
                             "its own)")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    sides = {"Twill": [], "PyTorch eager": [], "PyTorch torch.compile": []}
    implementation = ""
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        write_data(work / "data.jsonl", BATCH * args.steps)
        for repeat in range(args.repeats):
            sides["Twill"] += twill_steps(bin_dir, work, f"twill-{repeat}",
                                          args.threads, args.steps,
                                          args.experts)[args.warmup:]
            for side, compiled in (("PyTorch eager", False),
                                   ("PyTorch torch.compile", True)):
                times, implementation = pytorch_steps(
                    args.threads, args.steps, compiled, args.implementation,
                    args.experts)
                sides[side] += times[args.warmup:]
            print({side: f"{statistics.median(times):.3f} s"
                   for side, times in sides.items()}, flush=True)
    twill = statistics.median(sides["Twill"])
    lines = ["| side | step (median) | step / Twill's |", "|---|---:|---:|"]
    for side, times in sides.items():
        median = statistics.median(times)
        lines.append(f"| {side} | {median:.3f} s | {median / twill:.2f} |")
    print("\n".join(lines))
    if args.markdown:
        args.markdown.write_text(
            f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
            f"{os.cpu_count()} cores, {args.threads} threads, PyTorch "
            f"{torch_version()}, transformers' experts implementation "
            f"{implementation}, experts {args.experts} "
            f"({EXPERTS[args.experts]}): one MoE LoRA "
            "step (module docstring), median of the steps after the first "
            f"{args.warmup} over {args.repeats} alternating runs a side.\n\n"
            + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
