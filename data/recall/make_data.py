"""Makes the key-value recall data of Twill's demo job (configs/tiny.textproto).

Each example is some filler tokens, a key token and the key's value token;
only the value is trained on (labels -100 elsewhere). A model that has not
learned the 64 pairs guesses the value about 1 time in 512; one that has,
always. train.jsonl and eval.jsonl hold the same pairs behind different
filler, so eval measures recall of the pairs, not of the examples.

    python3 make_data.py   # writes train.jsonl and eval.jsonl beside itself
"""
import json
import random
from pathlib import Path

PAIRS = 64
KEYS = range(16, 16 + PAIRS)           # key tokens
FILLER = range(300, 500)               # filler tokens
IGNORE = -100


def examples(pairs, variants, rng):
    rows = []
    for _ in range(variants):
        for key, value in pairs.items():
            filler = [rng.choice(FILLER) for _ in range(rng.randint(1, 6))]
            tokens = filler + [key, value]
            labels = [IGNORE] * (len(tokens) - 1) + [value]
            rows.append({"input_ids": tokens, "labels": labels})
    rng.shuffle(rows)
    return rows


def main():
    rng = random.Random(0)
    values = rng.sample(range(100, 300), PAIRS)
    pairs = dict(zip(KEYS, values))
    here = Path(__file__).parent
    for name, variants, seed in (("train", 24, 1), ("eval", 2, 2)):
        with open(here / f"{name}.jsonl", "w") as out:
            for row in examples(pairs, variants, random.Random(seed)):
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
