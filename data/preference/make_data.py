"""Makes the synthetic preference pairs of Twill's DPO demo (the tiny model of
configs/tiny.textproto, train.objective DPO).

Each pair's prompt is a few tokens; the chosen completion is those tokens in
increasing order, the rejected one the same tokens in another order, each
ending in token 2. A model that has not learned the rule prefers either
about as often; one that has prefers the sorted one on prompts it never
saw. train.jsonl and heldout.jsonl hold different prompts, pre-tokenized
({"prompt_ids", "chosen_ids", "rejected_ids"}, as `twill-tokenize --format
preference` writes them), so no tokenizer is needed.

    python3 make_data.py   # writes train.jsonl and heldout.jsonl beside itself
"""
import json
import random
from pathlib import Path

BOS, EOS = 1, 2
TOKENS = range(16, 112)  # the prompts' tokens


def pairs(count, rng, seen):
    made = []
    while len(made) < count:
        prompt = rng.sample(TOKENS, rng.randint(3, 7))
        if tuple(prompt) in seen:
            continue
        seen.add(tuple(prompt))
        chosen = sorted(prompt)
        rejected = chosen[:]
        while rejected == chosen:
            rng.shuffle(rejected)
        made.append({"prompt_ids": [BOS] + prompt,
                     "chosen_ids": chosen + [EOS],
                     "rejected_ids": rejected + [EOS]})
    return made


def main():
    rng = random.Random(0)
    seen = set()
    here = Path(__file__).resolve().parent
    for name, count in (("train.jsonl", 256), ("heldout.jsonl", 64)):
        with open(here / name, "w") as out:
            for pair in pairs(count, rng, seen):
                out.write(json.dumps(pair) + "\n")


if __name__ == "__main__":
    main()
