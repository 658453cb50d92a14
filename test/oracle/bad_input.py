"""End-to-end bad-input checks of twill-train: broken weights, adapters and
batches must end the run with a non-zero exit and a message naming the file
and the tensor (or field), never a crash.

    python bad_input.py --bin BUILD/bin --work DIR
"""
import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

WEIGHTS = "model.safetensors"
VICTIM = "model.layers.1.self_attn.k_proj.weight"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work = args.work / "bad_input"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=50, hidden_size=16, intermediate_size=24,
        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        max_position_embeddings=32))
    model.save_pretrained(work / "good")
    get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=[
        "q_proj", "v_proj"])).save_pretrained(work / "adapter")
    (work / "job.textproto").write_text(
        f'checkpoint {{ base_dir: "{work / "good"}" }}\n'
        'lora { rank: 2 alpha: 4 target_modules: ["q_proj", "v_proj"] }\n'
        "train { batch_size: 1 seq_len: 4 }\n")
    subprocess.run([args.bin / "twillc", work / "job.textproto", "-o",
                    work / "job.twx"], check=True)
    batch = {"tokens": [[1, 2, 3, 4]], "labels": [[2, 3, 4, -100]],
             "positions": [[0, 1, 2, 3]], "segments": [[0, 0, 0, 0]]}
    (work / "batch.json").write_text(json.dumps(batch))
    tensors = load_file(str(work / "good" / WEIGHTS))

    def broken_model(name, mutate):
        folder = work / name
        shutil.copytree(work / "good", folder)
        mutate(folder / WEIGHTS)
        return folder

    def without_victim(path):
        save_file({k: v for k, v in tensors.items() if k != VICTIM}, str(path))

    def victim_reshaped(path):
        save_file({**tensors, VICTIM: tensors[VICTIM].reshape(-1)}, str(path))

    def victim_as_int(path):
        save_file({**tensors, VICTIM: tensors[VICTIM].to(torch.int32)},
                  str(path))

    def truncated(path):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 64])

    def corrupt_header(path):
        data = bytearray(path.read_bytes())
        data[8:16] = b"#garbage"  # the JSON header no longer parses
        path.write_bytes(bytes(data))

    def wrong_batch(content):
        path = work / f"batch-{len(list(work.glob('batch-*')))}.json"
        path.write_text(content)
        return path

    good_adapter = work / "adapter"
    other_adapter = work / "adapter_r4"
    get_peft_model(LlamaForCausalLM(model.config), LoraConfig(
        r=4, lora_alpha=4, target_modules=["q_proj", "v_proj"])) \
        .save_pretrained(other_adapter)
    # One trained on more modules than the job adapts: never loaded in part.
    more_targets = work / "adapter_more_targets"
    get_peft_model(LlamaForCausalLM(model.config), LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj", "o_proj"])) \
        .save_pretrained(more_targets)
    # The job's modules, and a parameter too (PEFT's target_parameters).
    more_parameters = work / "adapter_more_parameters"
    get_peft_model(LlamaForCausalLM(model.config), LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
        target_parameters=["mlp.down_proj.weight"])) \
        .save_pretrained(more_parameters)
    fewer_targets = work / "adapter_fewer_targets"
    get_peft_model(LlamaForCausalLM(model.config), LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj"])) \
        .save_pretrained(fewer_targets)
    # rsLoRA and DoRA adapters of the job's shape: their weights mean
    # something else than plain LoRA's, so a plain job refuses them (an
    # rsLoRA job, lora.use_rslora, loads the first, a DoRA job the second:
    # llama_oracle.py rslora, dora).
    variants = {}
    for variant in ("use_rslora", "use_dora"):
        variants[variant] = work / f"adapter_{variant}"
        get_peft_model(LlamaForCausalLM(model.config), LoraConfig(
            r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"],
            **{variant: True})).save_pretrained(variants[variant])

    cases = [
        ("missing tensor", broken_model("missing", without_victim), None,
         work / "batch.json", [WEIGHTS, VICTIM]),
        ("wrong shape", broken_model("reshaped", victim_reshaped), None,
         work / "batch.json", [WEIGHTS, VICTIM, "has shape [128], expected [8, 16]"]),
        ("wrong dtype", broken_model("int", victim_as_int), None,
         work / "batch.json", [WEIGHTS, VICTIM, "dtype I32 is not supported"]),
        ("truncated file", broken_model("truncated", truncated), None,
         work / "batch.json", [WEIGHTS, "truncated"]),
        ("corrupt header", broken_model("corrupt", corrupt_header), None,
         work / "batch.json", [WEIGHTS, "corrupt header"]),
        ("adapter rank differs", work / "good", other_adapter,
         work / "batch.json", ["adapter_config.json", "r=4", "lora.rank=2"]),
        ("adapter of more target modules", work / "good", more_targets,
         work / "batch.json", ["adapter_config.json", "target_modules are "
                               "o_proj,q_proj,v_proj"]),
        ("adapter of target parameters", work / "good", more_parameters,
         work / "batch.json", ["adapter_config.json", "target_parameters are "
                               "mlp.down_proj.weight, and the job's "
                               "lora.target_parameters are none"]),
        ("adapter of fewer target modules", work / "good", fewer_targets,
         work / "batch.json", ["adapter_config.json", "target_modules are "
                               "q_proj, and the job's lora.target_modules "
                               "are q_proj,v_proj"]),
        ("rsLoRA adapter", work / "good", variants["use_rslora"],
         work / "batch.json", ["adapter_config.json", "use_rslora is true",
                               "lora.use_rslora is false"]),
        ("DoRA adapter", work / "good", variants["use_dora"],
         work / "batch.json", ["adapter_config.json", "use_dora is true",
                               "lora.use_dora is false"]),
        ("batch too short", work / "good", good_adapter,
         wrong_batch(json.dumps({**batch, "labels": [[2, 3]]})),
         ["'labels' holds 2 values; the job needs 4"]),
        ("batch misses an input", work / "good", good_adapter,
         wrong_batch(json.dumps({"tokens": [[1, 2, 3, 4]]})), ["no 'labels'"]),
        ("token outside the vocabulary", work / "good", good_adapter,
         wrong_batch(json.dumps({**batch, "tokens": [[1, 2, 3, 99]]})),
         ["token id 99 at position 3 is outside the vocabulary [0, 50)"]),
    ]
    failures = 0
    for name, weights, adapter, batch_path, expected in cases:
        command = [args.bin / "twill-train", work / "job.twx", "--eval",
                   "--batch", batch_path, "--weights", weights]
        if adapter:
            command += ["--adapter", adapter]
        run = subprocess.run(command, capture_output=True, text=True)
        message = run.stderr.strip()
        ok = (run.returncode == 1 and
              all(text in message for text in expected))
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}: {name}: exit {run.returncode}: "
              f"{message}")
    print(f"{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
