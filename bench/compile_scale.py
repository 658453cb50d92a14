"""How twillc's time and memory grow with the model's depth: the 8B job
(configs/llama3_1_8b_lora.textproto, random base) compiled with --report
at several layer counts, each timed and its peak resident set taken from
the kernel (os.wait4's ru_maxrss).

    python bench/compile_scale.py BUILD/bin [--baseline DIR]
                                  [--layers 32 128 256 512] [--markdown FILE]

With --baseline, a second twillc (another build's bin folder) compiles the
same jobs in the same run, and the table gives this one's figures as
ratios of it.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "configs" / "llama3_1_8b_lora.textproto"


def measure(twillc, layers, out):
    """Seconds and peak MiB of one compile."""
    command = [str(twillc), str(JOB), "checkpoint.random_base=true",
               "checkpoint.base_dir=", f"model.num_hidden_layers={layers}",
               "--report", "-o", str(out)]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed: {process.stderr.read()}")
    return seconds, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bin", type=Path)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--layers", type=int, nargs="+",
                        default=[32, 128, 256, 512])
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    out = Path(os.environ.get("TMPDIR", "/tmp")) / "compile_scale.twx"
    header = ["layers", "seconds", "peak MiB"]
    if args.baseline:
        header += ["baseline seconds", "baseline peak MiB", "time ratio",
                   "memory ratio"]
    rows = []
    for layers in args.layers:
        seconds, mib = measure(args.bin / "twillc", layers, out)
        row = [str(layers), f"{seconds:.2f}", f"{mib:.0f}"]
        if args.baseline:
            base_seconds, base_mib = measure(args.baseline / "twillc", layers,
                                             out)
            row += [f"{base_seconds:.2f}", f"{base_mib:.0f}",
                    f"{seconds / base_seconds:.2f}", f"{mib / base_mib:.3f}"]
        rows.append(row)
        print(" ".join(row), flush=True)
    out.unlink(missing_ok=True)
    table = ["| " + " | ".join(header) + " |",
             "|" + "---:|" * len(header)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    text = "\n".join(table) + "\n"
    print(text)
    if args.markdown:
        command = "python bench/compile_scale.py " + " ".join(sys.argv[1:])
        args.markdown.write_text(
            f"`{command}` on {os.cpu_count()} cores: twillc --report of the "
            "8B job at each layer count (module docstring).\n\n" + text)


if __name__ == "__main__":
    main()
