"""Twill's Llama 3 tokenizer against tiktoken with the tokenizer.model that
PyPI's llama-models ships, and against its chat format.

    python tokenizer_oracle.py --bin BUILD/bin

Token ids must be identical on a varied corpus: many scripts, emoji (also
joined ones), code, whitespace runs, digits, contractions in any case,
punctuation runs and special-token text; the chat format must give
llama-models' ids; decoding must give the text back. The same vocabulary
as a Hugging Face tokenizer.json (converted by transformers, as Meta's was)
must give the same ids.
"""
import argparse
import json
import random
import subprocess
import tempfile
import sys
from pathlib import Path

import llama_models
from llama_models.llama3.chat_format import ChatFormat
from llama_models.llama3.tokenizer import Tokenizer
from llama_models.datatypes import RawMessage

MODEL = Path(llama_models.__file__).parent / "llama3" / "tokenizer.model"

SAMPLES = [
    "Hello, world! It's a fine day; isn't it? I'M SURE THEY'LL COME, we'd go.",
    "Дивізія рушила на схід. Ελληνικά γράμματα. עברית ועוד. العربية جميلة.",
    "日本語のテキストと中文文本，还有한국어 문장입니다。",
    "हिन्दी में लिखा गया वाक्य। ภาษาไทยไม่มีช่องว่าง",
    "Emoji: 🚀🔥👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 and ♥️ ✔︎",
    "def f(x):\n\treturn {'a': [1, 2, 3], \"b\": x ** 2}  # comment\n\n\n",
    "    leading spaces\n\n\n\ntrailing spaces   \n\t\t tabs\r\n windows\r\n",
    "Numbers: 1 12 123 1234 12345 3.14159 1,000,000 2026-11-30 0x1F ½ ² ٣٤",
    "Punctuation!!! ??? ... --- *** ((())) [[[]]] {{{}}} <<< >>> ''' \"\"\"",
    "Special text: <|begin_of_text|> x <|eot_id|><|start_header_id|>user"
    "<|end_header_id|> but not <|not_special|> nor <|eot_id or |>.",
    "mixed-CASE Words, don'T, WON'T, Y'ALL'D'VE, rock'n'roll, 'quoted'",
    "",
    " ",
    "\n",
    "a" * 300 + " " + "ab" * 150,
]


def random_text(rng, length):
    ranges = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff),
              (0x590, 0x6ff), (0x900, 0x97f), (0x3040, 0x30ff),
              (0x4e00, 0x4fff), (0xac00, 0xad00), (0x1f300, 0x1f64f),
              (0x2000, 0x206f)]
    chars = []
    for _ in range(length):
        if rng.random() < 0.15:
            chars.append(rng.choice([" ", "  ", "\n", "\t", "\n\n", "'s", "'T"]))
            continue
        low, high = rng.choice(ranges)
        chars.append(chr(rng.randint(low, high)))
    return "".join(chars)


def twill(bin_dir, *args, stdin, tokenizer=MODEL):
    run = subprocess.run([bin_dir / "twill-tokenize", "--tokenizer",
                          str(tokenizer), *args], input=stdin.encode(),
                         capture_output=True, check=True)
    return run.stdout.decode()


def tokenizer_json(reference, directory):
    """The tokenizer.json of the same vocabulary, as transformers converts a
    tiktoken model (how Llama 3's Hugging Face tokenizer.json was made), its
    special tokens added after the vocabulary as Meta's file has them."""
    from transformers.convert_slow_tokenizer import TikTokenConverter
    converted = TikTokenConverter(vocab_file=str(MODEL),
                                  pattern=reference.pat_str).converted()
    path = Path(directory) / "tokenizer.json"
    converted.save(str(path))
    data = json.loads(path.read_text())
    data["added_tokens"] = [
        {"id": token_id, "content": name, "single_word": False,
         "lstrip": False, "rstrip": False, "normalized": False,
         "special": True}
        for name, token_id in sorted(reference.special_tokens.items(),
                                     key=lambda item: item[1])]
    path.write_text(json.dumps(data))
    return path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    args = parser.parse_args()
    reference = Tokenizer(MODEL)
    rng = random.Random(0)
    documents = SAMPLES + [random_text(rng, rng.randint(20, 400))
                           for _ in range(40)]
    documents.append("\n\n".join(documents))  # everything at once

    failures = 0
    total = 0
    with tempfile.TemporaryDirectory() as directory:
        hugging_face = tokenizer_json(reference, directory)
        # tokenizer.json and tokenizer.model give the same ids.
        joined = documents[-1]
        expected = reference.model.encode(joined, allowed_special="all",
                                          disallowed_special=())
        actual = [int(t) for t in twill(args.bin, stdin=joined,
                                         tokenizer=hugging_face).split()]
        if actual != expected:
            failures += 1
            print("FAIL: tokenizer.json gives other ids than tiktoken")
        else:
            print(f"tokenizer.json: {len(actual)} tokens identical")
    for document in documents:
        expected = reference.model.encode(document, allowed_special="all",
                                          disallowed_special=())
        actual = [int(t) for t in twill(args.bin, stdin=document).split()]
        total += len(expected)
        if actual != expected:
            failures += 1
            first = next((i for i, (a, b) in enumerate(zip(actual, expected))
                          if a != b), min(len(actual), len(expected)))
            print(f"FAIL: {document[:60]!r}: differs at token {first}: "
                  f"{actual[first:first + 5]} vs {expected[first:first + 5]}")
        decoded = twill(args.bin, "--decode",
                        stdin=" ".join(map(str, actual)))
        if decoded != document:
            failures += 1
            print(f"FAIL: decoding {document[:60]!r} gave {decoded[:60]!r}")
    print(f"{len(documents)} documents, {total} tokens compared")

    dialog = [RawMessage(role="system", content="You are terse."),
              RawMessage(role="user", content="  What is 2+2?\n"),
              RawMessage(role="assistant", content="4"),
              RawMessage(role="user", content="And 3+3? 🚀")]
    expected = ChatFormat(reference).encode_dialog_prompt(dialog).tokens
    messages = [{"role": m.role, "content": m.content} for m in dialog]
    actual = [int(t) for t in twill(args.bin, "--chat", "--generation-prompt",
                                     stdin=json.dumps(messages)).split()]
    if actual != expected:
        failures += 1
        print(f"FAIL: chat format: {actual} vs {expected}")
    else:
        print(f"chat format: {len(actual)} tokens identical")
    print(f"{len(documents) * 2 + 2 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
