"""Loads the trained adapter with PEFT and answers a question.

    python3 generate.py MODEL_FOLDER ADAPTER_FOLDER "question"

As you would use any PEFT adapter: the base model from its folder, the
adapter on top, the question through the model's chat template, greedy
decoding to the end of the assistant's turn.
"""
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer

SYSTEM = "You are a concise astronomy guide."


def main():
    base, adapter, question = sys.argv[1:4]
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base), adapter)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": question}]
    ids = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt",
        return_dict=True)["input_ids"]
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=16, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
    print(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True))


if __name__ == "__main__":
    main()
