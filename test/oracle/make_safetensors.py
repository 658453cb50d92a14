"""Writes safetensors files with the reference `safetensors` + `torch`
libraries for Twill's reader tests (test/unit/SafetensorsTest.cpp).

    python make_safetensors.py OUT_DIR

OUT_DIR/dtypes.safetensors holds one tensor per stored dtype (`x.f32`,
`x.f16`, `x.bf16`) and, beside each, its values widened to fp32 by torch
(`x.f16.as_f32`, ...): what Twill's conversion must reproduce bit for bit.
"""
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    values = torch.randn(3, 5, 7, generator=generator) * 100
    # Edge cases of the narrow formats: signed zeros, f16 subnormals and
    # overflow to infinity, bf16's wide range.
    special = torch.tensor(
        [0.0, -0.0, 1e-6, -3e-7, 6e-8, 70000.0, -1e30, 1e-30, float("inf"),
         float("-inf"), 0.1, -2.5, 65504.0, 1.0 / 3.0]
    )
    tensors = {}
    for name, data in (("x", values), ("special", special)):
        tensors[f"{name}.f32"] = data.clone()
        for suffix, dtype in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            narrow = data.to(dtype)
            tensors[f"{name}.{suffix}"] = narrow
            tensors[f"{name}.{suffix}.as_f32"] = narrow.to(torch.float32)
    save_file(tensors, str(out_dir / "dtypes.safetensors"),
              metadata={"format": "pt"})
    # A dtype Twill does not read, to check the message.
    save_file({"ids": torch.arange(4)}, str(out_dir / "int64.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
