"""Two training runs' output folders hold the same numbers, bit for bit,
under names that differ only by PREFIX (every tensor of the second's
adapter and merged model is the first's, with PREFIX after PEFT's
"base_model.model."), and the same losses and gradient norms.

    python same_but_names.py FIRST SECOND PREFIX
"""
import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

first, second, prefix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
peft = "base_model.model."


def renamed(name):
    return (peft + prefix + name[len(peft):] if name.startswith(peft)
            else prefix + name)


def metrics(folder):
    return [(step["loss"], step["grad_norm"])
            for step in map(json.loads,
                            (folder / "metrics.jsonl").read_text().splitlines())]


problems = []
if metrics(first) != metrics(second) or not metrics(first):
    problems.append(f"losses differ: {metrics(first)} / {metrics(second)}")
files = sorted(path.relative_to(first) for path in first.rglob("*.safetensors"))
if not files:
    problems.append(f"{first} holds no safetensors")
for relative in files:
    a, b = load_file(first / relative), load_file(second / relative)
    if sorted(map(renamed, a)) != sorted(b):
        problems.append(f"{relative}: names {sorted(a)} / {sorted(b)}")
        continue
    problems += [f"{relative}: {name} differs" for name in a
                 if not np.array_equal(a[name], b[renamed(name)])]
print("\n".join(problems) or f"SAME but names: {len(files)} files")
