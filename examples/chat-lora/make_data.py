"""Writes the worked example's conversations: train.jsonl and eval.jsonl.

Each line is OpenAI's chat form, {"messages": [{"role", "content"}, ...]},
as a user's own data would be: a system prompt, a question about one of 40
made-up planets, and the assistant's answer. Training teaches the answers;
eval.jsonl asks about the same planets in other words, so its accuracy
measures what was learned, not the examples seen.

    python3 make_data.py   # writes train.jsonl and eval.jsonl beside itself
"""
import json
import random
from pathlib import Path

SYSTEM = "You are a concise astronomy guide."
COLOURS = ["red", "blue", "green", "amber", "violet", "silver", "white",
           "black"]
ASKED = ["What colour is {}?", "Which colour is the planet {}?",
         "Tell me the colour of {}."]
ASKED_IN_EVAL = "What is the colour of the planet {}?"


def planets(rng):
    names = set()
    while len(names) < 40:
        names.add(rng.choice("BCDFGKLMNPRSTVZ") + rng.choice("aeiou")
                  + rng.choice("lmnrsx") + rng.choice("aeiou"))
    return {name: rng.choice(COLOURS) for name in sorted(names)}


def conversation(question, colour):
    return {"messages": [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": question},
        {"role": "assistant", "content": f"It is {colour}."}]}


def main():
    rng = random.Random(0)
    colours = planets(rng)
    here = Path(__file__).parent
    train = [conversation(asked.format(name), colour)
             for name, colour in colours.items() for asked in ASKED]
    rng.shuffle(train)
    evaluation = [conversation(ASKED_IN_EVAL.format(name), colour)
                  for name, colour in colours.items()]
    for name, rows in (("train", train), ("eval", evaluation)):
        with open(here / f"{name}.jsonl", "w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
