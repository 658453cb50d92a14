"""Encode speed of Twill's tokenizers against tiktoken and Hugging Face
tokenizers (Rust, one thread), same text, same machine, same run.

    python bench/tokenizer_speed.py BUILD/bin [MEGABYTES]

Twill is timed through twill-tokenize on the whole text, minus the time it
takes on empty input (process start and vocabulary load), best of 3;
tiktoken through its Encoding.encode with all special tokens allowed (the
llama-models Tokenizer's), and tokenizers through Tokenizer.encode(text,
add_special_tokens=False), best of 3 each. Llama 3's vocabulary as tiktoken's
tokenizer.model and as a tokenizer.json (transformers' conversion, as
Meta's), and a SentencePiece-style BPE with byte fallback (the oracle's
llama2 pipeline: Prepend and Replace normalizers, a 400-token vocabulary,
so most of the text falls back to bytes). Each must give the same ids.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"  # tokenizers on one thread
os.environ["TOKENIZERS_PARALLELISM"] = "false"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test" /
                       "oracle"))

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


def twill_speed(bin_dir, tokenizer, text):
    """Twill's encode time (load excluded) and its ids."""
    def run(data):
        return subprocess.run(
            [bin_dir / "twill-tokenize", "--tokenizer", str(tokenizer)],
            input=data.encode(), capture_output=True, check=True).stdout

    load, _ = best_of(3, lambda: run(""))
    total, output = best_of(3, lambda: run(text))
    return total - load, load, [int(t) for t in output.split()]


def main():
    bin_dir = Path(sys.argv[1])
    megabytes = float(sys.argv[2]) if len(sys.argv) > 2 else 4
    text = corpus(megabytes)
    size = len(text.encode())
    from hf_tokenizer_oracle import pipelines
    from tokenizer_oracle import tokenizer_json
    from tokenizers import Tokenizer as HfTokenizer

    reference = Tokenizer(MODEL)
    tiktoken_time, expected = best_of(
        3, lambda: reference.model.encode(text, allowed_special="all"))
    print(f"text: {size / 1e6:.1f} MB, {len(expected)} Llama 3 tokens")
    rows = [("Llama 3, tiktoken's tokenizer.model", "tiktoken",
             tiktoken_time, MODEL, expected)]
    with tempfile.TemporaryDirectory() as directory:
        converted = tokenizer_json(reference, directory)
        hugging = HfTokenizer.from_file(str(converted))
        hf_time, hf_ids = best_of(3, lambda: hugging.encode(
            text, add_special_tokens=False).ids)
        assert hf_ids == expected, "tokenizers gives other ids"
        rows.append(("Llama 3, tokenizer.json", "tokenizers", hf_time,
                     converted, expected))
        sentencepiece = pipelines()["llama2"][0]
        path = Path(directory) / "llama2.json"
        sentencepiece.save(str(path))
        sp_time, sp_ids = best_of(3, lambda: sentencepiece.encode(
            text, add_special_tokens=False).ids)
        rows.append(("SentencePiece-style BPE, byte fallback", "tokenizers",
                     sp_time, path, sp_ids))
        for name, baseline, baseline_time, tokenizer, ids in rows:
            encode_time, load, actual = twill_speed(bin_dir, tokenizer, text)
            assert actual == ids, f"{name}: different ids"
            print(f"{name}: {baseline} {size / 1e6 / baseline_time:.1f} MB/s, "
                  f"twill {size / 1e6 / encode_time:.1f} MB/s (load "
                  f"{load * 1000:.0f} ms excluded): twill / {baseline} "
                  f"{baseline_time / encode_time:.2f}x")
        # The same text as documents of about 2 KB (how training data
        # comes): tokenizers encodes one at a time, Twill reads them as
        # JSON lines.
        documents, start = [], 0
        while start < len(text):
            end = text.find(" ", start + 2000)
            end = len(text) if end < 0 else end
            documents.append(text[start:end])
            start = end
        lines = "".join(json.dumps(d) + "\n" for d in documents).encode()
        for name, hf in (("Llama 3, tokenizer.json", hugging),
                         ("SentencePiece-style BPE", sentencepiece)):
            path = converted if hf is hugging else Path(directory) / "llama2.json"
            hf_time, _ = best_of(3, lambda: [hf.encode(
                d, add_special_tokens=False).ids for d in documents])
            load, _ = best_of(3, lambda: subprocess.run(
                [bin_dir / "twill-tokenize", "--tokenizer", str(path),
                 "--lines"], input=b"", capture_output=True, check=True))
            total, _ = best_of(3, lambda: subprocess.run(
                [bin_dir / "twill-tokenize", "--tokenizer", str(path),
                 "--lines"], input=lines, capture_output=True, check=True))
            print(f"{name}, {len(documents)} documents: tokenizers "
                  f"{size / 1e6 / hf_time:.1f} MB/s, twill "
                  f"{size / 1e6 / (total - load):.1f} MB/s: twill / "
                  f"tokenizers {hf_time / (total - load):.2f}x")


if __name__ == "__main__":
    main()
