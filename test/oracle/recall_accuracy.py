"""Loads what the demo job wrote (the random base in OUT/base and the PEFT
adapter in OUT) with transformers + PEFT and prints the next-token accuracy
on the labelled tokens of EVAL.jsonl, as twill-train computes it.

    python recall_accuracy.py OUT EVAL.jsonl
"""
import json
import sys

import torch
from peft import PeftModel
from transformers import LlamaForCausalLM


def main(out, eval_path):
    base = LlamaForCausalLM.from_pretrained(f"{out}/base")
    model = PeftModel.from_pretrained(base, out).eval()
    correct = total = 0
    with open(eval_path) as lines, torch.no_grad():
        for line in lines:
            example = json.loads(line)
            ids = torch.tensor([example["input_ids"]])
            predictions = model(input_ids=ids).logits[0].argmax(-1)
            for position, label in enumerate(example["labels"][1:]):
                if label != -100:
                    correct += int(predictions[position]) == label
                    total += 1
    print(f"transformers + peft next-token accuracy "
          f"{100 * correct / total:.1f}% ({total} tokens)")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
