"""Encode speed of Twill's Llama 3 tokenizer against tiktoken, same text,
same machine, same run.

    python bench/tokenizer_speed.py BUILD/bin [MEGABYTES]

Twill is timed through twill-tokenize on the whole text, minus the time it
takes on empty input (process start and vocabulary load), best of 3; tiktoken
through its Encoding.encode with all special tokens allowed (the
llama-models Tokenizer's), best of 3. Both must give the same ids.
"""
import random
import subprocess
import sys
import time
from pathlib import Path

import llama_models
from llama_models.llama3.tokenizer import Tokenizer

MODEL = Path(llama_models.__file__).parent / "llama3" / "tokenizer.model"


def corpus(megabytes):
    rng = random.Random(0)
    words = ["the", "model", "learns", "tokens", "Hello", "world", "it's",
             "2026", "3.14159", "naïve", "café", "Дивізія", "日本語", "🚀",
             "def f(x):", "return", "{'a': 1}", "\n", "\n\n", "    ", "\t",
             "don't", "WE'LL", "!!!", "...", "العربية", "हिन्दी", "1234567"]
    pieces, size = [], 0
    while size < megabytes * 1_000_000:
        word = rng.choice(words)
        pieces.append(word)
        size += len(word.encode()) + 1
    return " ".join(pieces)


def best_of(runs, action):
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    bin_dir = Path(sys.argv[1])
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 4
    text = corpus(megabytes)
    encoding = Tokenizer(MODEL).model

    def twill(data):
        return subprocess.run(
            [bin_dir / "twill-tokenize", "--tokenizer", str(MODEL)],
            input=data.encode(), capture_output=True, check=True).stdout

    load, _ = best_of(3, lambda: twill(""))
    twill_time, output = best_of(3, lambda: twill(text))
    tiktoken_time, expected = best_of(
        3, lambda: encoding.encode(text, allowed_special="all"))
    ids = [int(t) for t in output.split()]
    assert ids == expected, "different ids"
    encode_time = twill_time - load
    size = len(text.encode())
    print(f"text: {size / 1e6:.1f} MB, {len(ids)} tokens (identical)")
    print(f"tiktoken: {size / 1e6 / tiktoken_time:.1f} MB/s")
    print(f"twill:    {size / 1e6 / encode_time:.1f} MB/s "
          f"(load {load * 1000:.0f} ms excluded)")
    print(f"twill / tiktoken encode speed: {tiktoken_time / encode_time:.2f}x")


if __name__ == "__main__":
    main()
