"""One LoRA training step on the cpu: Twill's cpu backend against
transformers + PEFT + torch.optim.AdamW (eager), the same model, batch and
thread count, both measured in this one run.

    python bench/cpu_step.py BUILD/bin [--threads 1 2] [--steps 6]
                             [--repeats 3] [--profile-threads 2]
                             [--markdown FILE]

The model (issue 15): Llama, hidden 512, 8 layers, 8 query / 2 KV heads,
MLP 1536, vocab 8192, fp32; LoRA rank 8 (alpha 16) on all seven
projections; batch 2 x seq 512 of random tokens, no packing. A step is
forward, backward and the optimizer: Twill's `train_step` +
`optimizer_step` (from metrics.jsonl's elapsed_seconds), PyTorch's
forward, backward, AdamW step and zero_grad. Each side runs `--steps`
steps in a fresh process with OMP_NUM_THREADS (and torch.set_num_threads)
set; the first step is dropped. The two sides take turns, `--repeats`
times each (a shared machine's speed drifts: both see the same drift), and
the median of every kept step of a side is reported. With
`--profile-threads`, Twill runs once more with --profile and its per-kind
breakdown is printed.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = dict(vocab_size=8192, hidden_size=512, num_hidden_layers=8,
             num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=1536, rms_norm_eps=1e-5, rope_theta=500000.0,
             max_position_embeddings=1024, tie_word_embeddings=False)
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
           "down_proj"]
BATCH, SEQ, RANK, ALPHA = 2, 512, 8, 16


def job(steps, output, model=MODEL, modules=TARGETS, parameters=()):
    """The step's job: `model`'s fields, LoRA on `modules` (and on
    `parameters`, lora.target_parameters), `steps` steps into `output`."""
    def text(value):
        if isinstance(value, bool):
            return str(value).lower()
        return f'"{value}"' if isinstance(value, str) else str(value)
    fields = "\n".join(f"  {k}: {text(v)}" for k, v in model.items())
    targets = ", ".join(f'"{t}"' for t in modules)
    adapted = "".join(f' target_parameters: "{p}"' for p in parameters)
    return f"""model {{
{fields}
}}
lora {{ rank: {RANK} alpha: {ALPHA} dropout: 0 target_modules: [{targets}]{adapted} }}
parallel {{ dp: 1 tp: 1 }}
train {{
  batch_size: {BATCH} seq_len: {SEQ} gradient_accumulation_steps: 1
  epochs: 1 max_steps_per_epoch: {steps} seed: 0 lr: 1e-4 warmup_steps: 0
  max_grad_norm: 1.0
}}
data {{ format: TOKENIZED packed: false }}
checkpoint {{ random_base: true output_dir: "{output}" }}
"""


def write_data(path, rows):
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(rows):
            ids = [rng.randrange(MODEL["vocab_size"]) for _ in range(SEQ)]
            f.write(json.dumps({"input_ids": ids}) + "\n")


def step_times(output):
    """Each step's time (s) of a run that wrote `output`/metrics.jsonl."""
    elapsed = [json.loads(line)["elapsed_seconds"]
               for line in (output / "metrics.jsonl").read_text().splitlines()]
    return [b - a for a, b in zip([0] + elapsed, elapsed)]


def thread_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads))


def twill_steps(bin_dir, work, threads, steps, profile=False):
    """Step times (s) of a Twill run, and its profile summary if asked."""
    out = work / f"twill-{threads}"
    program = work / f"twill-{threads}.twx"
    (work / "job.textproto").write_text(job(steps, out))
    subprocess.run([bin_dir / "twillc", work / "job.textproto", "-o", program],
                   check=True)
    command = [bin_dir / "twill-train", program, "--data", work / "data.jsonl"]
    if profile:
        command.append(f"--profile={work / 'trace.json'}")
    run = subprocess.run(command, env=thread_env(threads), capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(run.stderr)
    times = step_times(out)
    summary = "\n".join(
        line for line in run.stdout[run.stdout.find("profile: "):].splitlines()
        if "trace written" not in line) if profile else ""
    return times, summary


PYTORCH_STEPS = """
import sys, time, json, torch
from transformers import LlamaConfig, LlamaForCausalLM
from peft import LoraConfig, get_peft_model
threads, steps, model_args, targets, batch, seq, rank, alpha = json.loads(sys.argv[1])
torch.set_num_threads(threads)
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(**model_args, attn_implementation="sdpa"))
model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha,
                       lora_dropout=0.0, target_modules=targets))
model.train()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                              lr=1e-4, weight_decay=0.0)
ids = torch.randint(0, model_args["vocab_size"], (batch, seq))
times = []
for _ in range(steps):
    start = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(
        [p for p in model.parameters() if p.requires_grad], 1.0)
    optimizer.step()
    optimizer.zero_grad()
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def pytorch_steps(threads, steps):
    arguments = json.dumps([threads, steps, MODEL, TARGETS, BATCH, SEQ, RANK,
                            ALPHA])
    run = subprocess.run([sys.executable, "-c", PYTORCH_STEPS, arguments],
                         env=thread_env(threads), capture_output=True,
                         text=True)
    if run.returncode:
        sys.exit(run.stderr)
    return json.loads(run.stdout.strip().splitlines()[-1])



def mesh_steps(bin_dir, work, name, overrides, ranks, steps, flags=()):
    """Compiles the job with `overrides` and trains `steps` steps of it
    under mpirun on `ranks` ranks, one thread each (work/data.jsonl as
    data). Returns the step times (s) and twill-train's output."""
    out, program = work / name, work / f"{name}.twx"
    (work / f"{name}.textproto").write_text(job(steps, out))
    subprocess.run([bin_dir / "twillc", work / f"{name}.textproto",
                    *overrides, "-o", program], check=True)
    command = ["mpirun", "-np", str(ranks), "--oversubscribe",
               bin_dir / "twill-train", program, "--data", work / "data.jsonl",
               *flags]
    env = dict(thread_env(1), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run([str(part) for part in command], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name}: {done.stdout}{done.stderr}")
    return step_times(out), done.stdout


def cpu_name():
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "an unknown cpu"


def torch_version():
    return subprocess.run([sys.executable, "-c",
                           "import torch; print(torch.__version__)"],
                          capture_output=True, text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin", type=Path)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile-threads", type=int, default=0)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    bin_dir = args.bin.resolve()
    lines = ["| threads | Twill step | PyTorch step | PyTorch / Twill |",
             "|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        write_data(work / "data.jsonl", BATCH * args.steps)
        for threads in args.threads:
            twill_times, torch_times = [], []
            for _ in range(args.repeats):
                twill_times += twill_steps(bin_dir, work, threads,
                                           args.steps)[0][1:]
                torch_times += pytorch_steps(threads, args.steps)[1:]
            twill = statistics.median(twill_times)
            torch = statistics.median(torch_times)
            lines.append(f"| {threads} | {twill:.3f} s | {torch:.3f} s | "
                         f"{torch / twill:.2f} |")
            print(lines[-1], flush=True)
        summary = ""
        if args.profile_threads:
            _, summary = twill_steps(bin_dir, work, args.profile_threads,
                                     args.steps, profile=True)
            print(summary)
    if args.markdown:
        text = (f"`python {' '.join(sys.argv)}` on {cpu_name()}, "
                f"{os.cpu_count()} cores, PyTorch {torch_version()}: one "
                "LoRA step (module docstring), median of the steps after "
                f"the first over {args.repeats} alternating runs a side.\n\n"
                + "\n".join(lines) + "\n")
        if summary:
            text += (f"\nTwill's profile at {args.profile_threads} threads "
                     "(`--profile`, steps after the first):\n\n```\n" +
                     summary.strip() + "\n```\n")
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
