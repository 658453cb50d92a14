"""Chat data through a model's template: Twill against transformers, same
conversations, same tokenizer, same machine, same run.

    python bench/chat_data_speed.py BUILD/bin [CONVERSATIONS]

The conversations (default 2000: three exchanges each, about 6.7 KB of
text) go through the Qwen 2.5 style template with the oracle's Qwen2
tokenizer (test/oracle/chat_data_oracle.py's model folder). Twill is timed
through `twill-tokenize --model DIR --data FILE`, what twill-train reads:
the template's text, its ids and the assistant turns' labels, and with
--train-on-input (ids only, every token trained); transformers through
apply_chat_template(messages, tokenize=True), ids only, on one thread. Best
of 3 each; Twill's ids must be transformers'.
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

from chat_data_oracle import model_folder  # noqa: E402
from hf_tokenizer_oracle import pipelines  # noqa: E402


def conversations(count):
    rng = random.Random(0)
    words = ("the quick brown fox jumps over lazy dog 日本 emoji 🚀 "
             "code print(x) and more words here").split()
    for _ in range(count):
        messages = []
        for _ in range(3):
            messages.append({"role": "user", "content": " ".join(
                rng.choice(words) for _ in range(150))})
            messages.append({"role": "assistant", "content": " ".join(
                rng.choice(words) for _ in range(250))})
        yield messages


def best(run):
    times = []
    for _ in range(3):
        began = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - began)
    return min(times), result


def main():
    binaries = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    work = Path(tempfile.mkdtemp())
    tokenizer, folder = model_folder(work, "qwen2_5", pipelines())
    cases = list(conversations(count))
    data = work / "chat.jsonl"
    data.write_text("".join(json.dumps({"messages": m}, ensure_ascii=False) +
                            "\n" for m in cases))

    def twill(*flags):
        return subprocess.run(
            [binaries / "twill-tokenize", "--model", folder, "--data", data,
             *flags], capture_output=True, text=True, check=True).stdout

    masked, rows = best(twill)
    everything, _ = best(lambda: twill("--train-on-input"))
    reference, expected = best(lambda: [
        list(tokenizer.apply_chat_template(m, tokenize=True)["input_ids"])
        for m in cases])
    got = [json.loads(line)["input_ids"] for line in rows.splitlines()]
    if got != expected:
        sys.exit("Twill's ids are not transformers'")
    megabytes = data.stat().st_size / 1e6
    print(f"{count} conversations, {megabytes:.1f} MB of JSONL")
    print(f"transformers apply_chat_template(tokenize=True): {reference:.2f} s")
    print(f"twill-tokenize --data, assistant turns' labels: {masked:.2f} s "
          f"({reference / masked:.2f}x transformers)")
    print(f"twill-tokenize --data --train-on-input: {everything:.2f} s "
          f"(the labels cost {masked / everything:.2f}x)")


if __name__ == "__main__":
    main()
