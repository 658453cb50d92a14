"""Makes a stand-in for a downloaded chat model: a tiny Qwen2 folder.

No model hub is needed: the folder is what `hf download` would give for a
Qwen2 chat model, only small and with random weights: config.json,
model.safetensors, generation_config.json, and its own byte-level BPE
tokenizer (tokenizer.json, trained on the example's conversations) with
ChatML's special tokens and chat template in tokenizer_config.json.

    python3 make_model.py [FOLDER]   # default: model/ beside this file

With a real model, skip this and point checkpoint.base_dir at its folder.
"""
import json
import sys
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM

HERE = Path(__file__).parent
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] "
          "+ '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
# Qwen2's pre-tokenizer: its split, then bytes as characters.
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def texts():
    for name in ("train.jsonl", "eval.jsonl"):
        for line in open(HERE / name):
            for message in json.loads(line)["messages"]:
                yield message["content"]


def tokenizer(folder):
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts(), trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    bpe.save(str(folder / "tokenizer.json"))
    json.dump({"tokenizer_class": "PreTrainedTokenizerFast",
               "chat_template": CHATML, "bos_token": None,
               "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "model_max_length": 256},
              open(folder / "tokenizer_config.json", "w"), indent=2)
    return bpe


def main():
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "model"
    folder.mkdir(parents=True, exist_ok=True)
    bpe = tokenizer(folder)
    config = Qwen2Config(
        vocab_size=512, hidden_size=64, intermediate_size=160,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256, rope_theta=1000000.0,
        # A trained model's logits span tens; 0.02's span about one, which
        # no LoRA of the projections could widen through the final norm.
        initializer_range=0.15,
        tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=bpe.token_to_id("<|im_end|>"),
        pad_token_id=bpe.token_to_id("<|endoftext|>"))
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(folder)
    print(f"a tiny Qwen2 chat model in {folder}")


if __name__ == "__main__":
    main()
