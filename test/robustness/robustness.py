"""Bad inputs and faults: each ends in an error that names what is wrong
(exit 1, never a crash, a hang or silence), or is survived.

    python robustness.py --bin BUILD/bin --work DIR --data train.jsonl \
        --config tiny.textproto

One case per finding of the adversarial pass (issue 14): JSON nested 100,000
deep wherever JSON is read; a plan bigger than the machine; divergence;
infinite config values; a tokenizer without its byte tokens; overlapping
or overflowing safetensors entries; adapters and checkpoints of other
targets; resuming past the data; a shard path out of the model folder; ids
outside the vocabulary; errors that must name their file; SIGTERM keeping
the log; a stopped rank ending the job within the collective timeout.
"""
import argparse
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

DEEP = "[" * 100000 + "]" * 100000
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


class Suite:
    def __init__(self, args):
        self.args, self.work = args, args.work
        self.failures = []

    def tool(self, name):
        return str(self.args.bin / name)

    def run(self, command, timeout=300, env=None):
        return subprocess.run([str(c) for c in command], capture_output=True,
                              text=True, timeout=timeout, env=env)

    def expect(self, name, result, *texts, code=1):
        """The command ended with `code` (not a signal) and its stderr says
        every one of `texts`."""
        message = result.stderr.strip()
        ok = result.returncode == code and all(t in message for t in texts)
        print(f"{'PASS' if ok else 'FAIL'}: {name}: exit {result.returncode}: "
              f"{message.splitlines()[-1] if message else ''}"[:400])
        if not ok:
            self.failures.append(f"{name}: exit {result.returncode}, stderr:\n"
                                 f"{message[-2000:]}")

    def check(self, name, ok, detail=""):
        print(f"{'PASS' if ok else 'FAIL'}: {name}{': ' + detail if detail else ''}")
        if not ok:
            self.failures.append(f"{name}: {detail}")

    def compile(self, name, *overrides):
        program = self.work / f"{name}.twx"
        out = self.work / f"{name}-out"
        result = self.run([self.tool("twillc"), self.args.config, *overrides,
                           f"checkpoint.output_dir={out}", "-o", program])
        if result.returncode:
            sys.exit(result.stderr)
        return program, out

    def train(self, program, *extra, data=None, timeout=300):
        return self.run([self.tool("twill-train"), program, "--data",
                         data or self.args.data, *extra], timeout=timeout)


def safetensors_bytes(header, data=b""):
    text = header if isinstance(header, str) else json.dumps(header)
    encoded = text.encode()
    return struct.pack("<Q", len(encoded)) + encoded + data


def write_adapter(folder, tensors, rank=8, alpha=16):
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(
        json.dumps({"r": rank, "lora_alpha": alpha}))


def deep_json(s):
    """JSON nested 100,000 deep wherever a tool reads JSON."""
    program, out = s.compile("deep", "train.max_steps_per_epoch=2")
    data = s.work / "deep.jsonl"
    data.write_text('{"input_ids": ' + DEEP + "}\n")
    s.expect("deep JSONL data", s.train(program, data=data),
             f"{data}:1: JSON nested deeper than")
    batch = s.work / "deep-batch.json"
    batch.write_text('{"tokens": ' + DEEP + "}")
    s.expect("deep batch.json",
             s.run([s.tool("twill-train"), program, "--eval", "--batch", batch]),
             f"{batch}: JSON nested deeper than")
    model = s.work / "deep-model"
    model.mkdir()
    (model / "config.json").write_text('{"a": ' + DEEP + "}")
    s.expect("deep config.json",
             s.run([s.tool("twillc"), s.args.config,
                    f"checkpoint.base_dir={model}", "--emit=config"]),
             "config.json: JSON nested deeper than")
    header = s.work / "deep-header"
    header.mkdir()
    (header / "model.safetensors").write_bytes(safetensors_bytes(
        '{"a": ' + DEEP + "}"))
    s.expect("deep safetensors header",
             s.train(program, "--weights", header),
             "model.safetensors: corrupt header: JSON nested deeper than")
    index = s.work / "deep-index"
    index.mkdir()
    (index / "model.safetensors.index.json").write_text(DEEP)
    s.expect("deep safetensors index", s.train(program, "--weights", index),
             "model.safetensors.index.json: JSON nested deeper than")
    adapter = s.work / "deep-adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(DEEP)
    s.expect("deep adapter_config.json",
             s.train(program, "--adapter", adapter),
             "adapter_config.json: JSON nested deeper than")
    tokenizer = s.work / "deep-tokenizer.json"
    tokenizer.write_text(DEEP)
    s.expect("deep tokenizer.json",
             s.run([s.tool("twill-tokenize"), "--tokenizer", tokenizer]),
             "deep-tokenizer.json: JSON nested deeper than")
    checkpoint = s.work / "deep-checkpoint" / "state"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer.json").write_text(DEEP)
    s.expect("deep trainer.json",
             s.train(program, "--resume", checkpoint.parent),
             "trainer.json: JSON nested deeper than")
    result = subprocess.run(
        [s.tool("twill-tokenize"), "--tokenizer", tokenizer_model(s), "--chat"],
        input=DEEP, capture_output=True, text=True, timeout=60)
    s.expect("deep --chat messages", result,
             "the messages: JSON nested deeper than")


def tokenizer_model(s):
    """A complete byte-level tiktoken vocabulary: the 256 bytes."""
    import base64
    path = s.work / "bytes.model"
    if not path.exists():
        path.write_text("".join(
            f"{base64.b64encode(bytes([b])).decode()} {b}\n"
            for b in range(256)))
    return path


def plan_bigger_than_machine(s):
    program, _ = s.compile("huge", "train.seq_len=10000000")
    s.expect("plan bigger than the machine", s.train(program),
             "GiB of host memory", "GiB available")


def divergence(s):
    program, out = s.compile("diverge", "train.lr=1e30",
                             "checkpoint.save_every=1")
    result = s.train(program)
    s.expect("divergence stops", result, "training diverged",
             "the last good checkpoint is ")
    named = Path(result.stderr.split("the last good checkpoint is ")[-1]
                 .split()[0])
    s.check("the named checkpoint exists and holds finite numbers",
            named.parent == out and all(
                np.isfinite(t).all() for t in load_file(str(
                    named / "adapter_model.safetensors")).values()), str(named))
    lines = (out / "metrics.jsonl").read_text().splitlines()
    parsed = [json.loads(line) for line in lines]  # valid JSON, every line
    s.check("divergence writes no non-finite metric or adapter",
            all(np.isfinite(p["loss"]) for p in parsed) and
            not (out / "adapter_model.safetensors").exists(),
            f"{len(parsed)} metric lines")
    # An update that overflows in the last step leaves that step's loss
    # finite: the adapter after it was written all inf and nan, exit 0.
    program, out = s.compile("overflow", "train.lr=1e300",
                             "train.warmup_steps=0", "train.epochs=1",
                             "train.max_steps_per_epoch=1")
    s.expect("an overflowing last update is not written as an adapter",
             s.train(program), "holds inf or nan: the last update diverged")
    s.check("... and no adapter is there",
            not (out / "adapter_model.safetensors").exists())


def model_folder(s):
    """A Hugging Face folder of the tiny model (the merged model a short run
    writes), sharded into several files with an index."""
    folder = s.work / "tiny-model"
    if folder.exists():
        return folder
    program, out = s.compile("merge", "train.max_steps_per_epoch=1",
                             "train.epochs=1", "checkpoint.merged=true",
                             "checkpoint.max_shard_bytes=100000")
    result = s.train(program)
    if result.returncode:
        sys.exit(result.stderr)
    shutil.copytree(out / "merged", folder)
    return folder


def non_finite_weights(s):
    folder = s.work / "nan-model"
    shutil.copytree(model_folder(s), folder)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    victim = "model.layers.1.mlp.up_proj.weight"
    shard = folder / index["weight_map"][victim]
    tensors = load_file(str(shard))
    tensors[victim][3, 5] = np.nan
    save_file(tensors, str(shard))
    program, _ = s.compile("nan-weights", "checkpoint.random_base=false",
                           f"checkpoint.base_dir={folder}")
    s.expect("NaN in the weights", s.train(program),
             f"{shard.name}: tensor '{victim}' holds nan")


def infinite_config(s):
    for field in ("train.lr", "model.rms_norm_eps", "lora.alpha",
                  "model.rope_theta", "train.eps"):
        s.expect(f"{field}=inf",
                 s.run([s.tool("twillc"), s.args.config, f"{field}=inf",
                        "--emit=config"]),
                 f"{field} must be a positive finite number, got inf")


def incomplete_tokenizer(s):
    empty = s.work / "empty.model"
    empty.write_text("")
    result = subprocess.run([s.tool("twill-tokenize"), "--tokenizer", empty],
                            input="hello", capture_output=True, text=True)
    s.expect("tokenizer without byte tokens", result,
             "has no token for byte 0x00")


def bad_safetensors(s):
    program, _ = s.compile("safetensors")
    overlap = s.work / "overlap"
    overlap.mkdir()
    entry = {"dtype": "F32", "shape": [4]}
    (overlap / "model.safetensors").write_bytes(safetensors_bytes(
        {"a": {**entry, "data_offsets": [0, 16]},
         "b": {**entry, "data_offsets": [8, 24]}}, bytes(24)))
    s.expect("overlapping data_offsets", s.train(program, "--weights", overlap),
             "tensors 'a' and 'b' overlap")
    overflow = s.work / "overflow"
    overflow.mkdir()
    (overflow / "model.safetensors").write_bytes(safetensors_bytes(
        {"a": {"dtype": "F32", "shape": [2**40, 2**40, 16],
               "data_offsets": [0, 16]}}, bytes(16)))
    s.expect("a shape that overflows", s.train(program, "--weights", overflow),
             "has more elements than any file holds")
    escape = s.work / "escape"
    escape.mkdir()
    (escape / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "../../../../etc/passwd"}}))
    s.expect("a shard path out of the folder",
             s.train(program, "--weights", escape),
             "shards must be files of the model folder")
    loop = s.work / "loop"
    loop.mkdir()
    (loop / "model.safetensors").symlink_to(loop / "model.safetensors")
    s.expect("a symlink loop", s.train(program, "--weights", loop),
             "model.safetensors: cannot open:")


def other_targets(s):
    # A job adapting q and v, and what a q, k, v run left behind.
    qkv, qkv_out = s.compile("qkv", "lora.target_modules=q_proj,k_proj,v_proj",
                             "checkpoint.save_every=2",
                             "train.max_steps_per_epoch=3", "train.epochs=1")
    result = s.train(qkv)
    if result.returncode:
        sys.exit(result.stderr)
    qv, _ = s.compile("qv", "lora.target_modules=q_proj,v_proj",
                      "train.max_steps_per_epoch=3", "train.epochs=1")
    s.expect("an adapter of other targets",
             s.train(qv, "--adapter", qkv_out),
             "adapter_config.json: target_modules are k_proj,q_proj,v_proj, "
             "and the job's lora.target_modules are q_proj,v_proj")
    s.expect("a checkpoint of other targets",
             s.train(qv, "--resume", qkv_out / "step_2"),
             "holds the state of another model: lora.target_modules is "
             '"q_proj", "k_proj", "v_proj" there and "q_proj", "v_proj" here')
    # Resuming where the data makes fewer steps than were taken.
    small = s.work / "small.jsonl"
    small.write_text("".join(Path(s.args.data).read_text().splitlines(True)[:20]))
    s.expect("resuming past the data",
             s.train(qkv, "--resume", qkv_out / "step_2", data=small),
             "the checkpoint is after step 2", "steps in all")
    negative = s.work / "negative"
    shutil.copytree(qkv_out / "step_2", negative)
    trainer = negative / "state" / "trainer.json"
    fields = json.loads(trainer.read_text())
    fields["steps"] = -5
    trainer.write_text(json.dumps(fields))
    s.expect("negative steps in trainer.json",
             s.train(qkv, "--resume", negative), "must not be negative")


def ids_outside_vocabulary(s):
    program, _ = s.compile("ids", "data.format=TOKENIZED")
    data = s.work / "bad-ids.jsonl"
    data.write_text('{"input_ids": [1, 2, 3]}\n\n{"input_ids": [4, 600, 5]}\n')
    s.expect("a token id outside the vocabulary", s.train(program, data=data),
             f"{data}:3: token id 600 at position 1 is outside the model's "
             "vocabulary [0, 512)")
    labels = s.work / "bad-labels.jsonl"
    labels.write_text('{"input_ids": [1, 2], "labels": [-100, 9999]}\n')
    s.expect("a label outside the vocabulary", s.train(program, data=labels),
             f"{labels}:1: label 9999")


def errors_name_their_file(s):
    empty = s.work / "empty.twx"
    empty.write_text("")
    s.expect("an empty .twx", s.train(empty), f"{empty} holds no program")
    program, _ = s.compile("batchy", "train.batch_size=64",
                           "train.gradient_accumulation_steps=64")
    # As the Hugging Face Trainer: a step of the rows there are, said.
    short = s.train(program)
    s.check("too little data for a step: one step of the rows left",
            short.returncode == 0 and "each epoch's last " in short.stdout, short.stdout[-400:] + short.stderr[-400:])
    program, full = s.compile("full")
    full.mkdir()
    (full / "metrics.jsonl").symlink_to("/dev/full")
    s.expect("a full disk while writing metrics", s.train(program),
             f"cannot write {full}/metrics.jsonl: No space left on device")
    result = s.run([s.tool("twillc"), s.args.config, "train={bogus: 1}",
                    "--emit=config"])
    s.expect("a section override that does not parse", result,
             "train: cannot parse '{bogus: 1}' as TrainConfig")
    s.check("no raw protobuf log line", "[libprotobuf" not in result.stderr)
    # As many as one argument holds (the kernel caps one at 128 KiB).
    many = "lora.target_modules=" + ",".join(["q_proj"] * 18000)
    result = s.run([s.tool("twillc"), s.args.config, many, "--emit=config"])
    s.expect("18,000 duplicate targets", result,
             "lora.target_modules lists 'q_proj' twice")
    s.check("... said once", result.stderr.count("\n") < 5,
            f"{result.stderr.count(chr(10))} lines")


def sigterm_keeps_the_log(s):
    program, _ = s.compile("sigterm")
    process = subprocess.Popen([s.tool("twill-train"), program, "--data",
                                s.args.data], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    steps = [line for line in out.splitlines() if line.startswith("step ")]
    s.check("SIGTERM keeps the log", len(steps) > 0,
            f"{len(steps)} step lines before the signal")


def stopped_rank(s):
    """A rank that stops (SIGSTOP) ends the job on every rank within the
    collective timeout plus a few seconds, naming what waited for whom."""
    # Long enough (epochs) that the stop lands while it trains.
    program, _ = s.compile("stopped", "parallel.dp=2", "train.epochs=100",
                           "parallel.collective_timeout_s=5")
    launch = subprocess.Popen(
        ["mpirun", "-np", "2", "--oversubscribe", s.tool("twill-train"),
         program, "--data", s.args.data], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=MPI_ENV)
    time.sleep(4)
    stopped = None
    for pid in subprocess.run(["pgrep", "-f", str(program)],
                              capture_output=True, text=True).stdout.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=1\0" in environ:
            os.kill(int(pid), signal.SIGSTOP)
            stopped = int(pid)
    began = time.time()
    try:
        out, _ = launch.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        launch.kill()
        out, _ = launch.communicate()
    seconds = time.time() - began
    if stopped:
        try:
            os.kill(stopped, signal.SIGKILL)
        except ProcessLookupError:
            pass
    s.check("a stopped rank ends the job", stopped is not None and
            launch.returncode != 0 and seconds < 5 + 10 and
            "did not arrive" in out and "rank(s) 1" in out and "step " in out,
            f"exit {launch.returncode} after {seconds:.1f} s: " +
            next((line for line in out.splitlines() if "error" in line), ""))


def run_cases(cases):
    """Runs `cases` on a Suite of the command line's tools and files; the
    exit status: 1 if any failed."""
    parser = argparse.ArgumentParser()
    for flag in ("--bin", "--work", "--data", "--config"):
        parser.add_argument(flag, type=Path, required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    s = Suite(args)
    for case in cases:
        case(s)
    print(f"{len(s.failures)} failed")
    for failure in s.failures:
        print("\n" + failure)
    return 1 if s.failures else 0


def main():
    return run_cases((deep_json, plan_bigger_than_machine, divergence,
                      non_finite_weights, infinite_config, incomplete_tokenizer,
                      bad_safetensors, other_targets, ids_outside_vocabulary,
                      errors_name_their_file, sigterm_keeps_the_log,
                      stopped_rank))


if __name__ == "__main__":
    sys.exit(main())
