"""Copies a Hugging Face model folder (one model.safetensors) and alters its
tensors, for the tests of what a downloaded folder may hold.

    python edit_checkpoint.py SOURCE DESTINATION EDIT ...

EDIT is one of
    NAME=D0xD1...    add NAME, zeros of that shape (float32)
    NAME[I]=VALUE    set element I of NAME (read flat) to float(VALUE)
"""
import re
import shutil
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def main():
    source, destination, *edits = sys.argv[1:]
    shutil.copytree(source, destination)
    path = f"{destination}/model.safetensors"
    tensors = load_file(path)
    for edit in edits:
        name, value = edit.split("=")
        element = re.fullmatch(r"(.+)\[(\d+)\]", name)
        if element:
            flat = tensors[element[1]].reshape(-1)
            flat[int(element[2])] = float(value)
        else:
            shape = [int(size) for size in value.split("x")]
            tensors[name] = np.zeros(shape, np.float32)
    save_file(tensors, path, {"format": "pt"})


if __name__ == "__main__":
    main()
