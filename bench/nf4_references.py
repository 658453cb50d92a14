"""Twill's NF4 codes against torchao's NF4Tensor, the second reference of
issue 37 (torchao is not among setup.sh's packages: `pip install torchao`).

    python bench/nf4_references.py WORK

WORK is a test/oracle/qlora_oracle.py work folder: its fp32 `base` and the
`twill-nf4` folder Twill wrote from it (`twill-train --write-base`), whose
codes are bitsandbytes' own. torchao's format agrees on the layout (blocks
of 64, two codes a byte, the high nibble first, scales less their mean
quantized again) and differs in the rest: its NF4 levels are rounded to 4
decimals and each value is divided by its block's absmax (bitsandbytes
multiplies by the reciprocal), so a value near a midpoint may take the
other code; its scales are linear int8 codes of a factor per block of 256,
not the dynamic map's. Prints how many codes differ.
"""
import sys
from pathlib import Path

from safetensors.torch import load_file
from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import to_nf4

SUFFIX = ".quant_state.bitsandbytes__nf4"


def main():
    work = Path(sys.argv[1])
    ours = load_file(str(work / "twill-nf4" / "model.safetensors"))
    base = load_file(str(work / "base" / "model.safetensors"))
    total = differ = 0
    for key in ours:
        if not key.endswith(SUFFIX):
            continue
        weight = key.removesuffix(SUFFIX)
        # The scales' blocks do not touch the codes: 64 divides every
        # weight's count of blocks here, where torchao needs it to.
        theirs = to_nf4(base[weight], 64, 64).quantized_data.reshape(-1)
        codes = ours[weight].reshape(-1)
        total += 2 * codes.numel()
        differ += int(((codes >> 4) != (theirs >> 4)).sum() +
                      ((codes & 15) != (theirs & 15)).sum())
    print(f"torchao's NF4Tensor and Twill: {differ} of {total} codes differ "
          f"({differ / total:.2e})")


if __name__ == "__main__":
    main()
