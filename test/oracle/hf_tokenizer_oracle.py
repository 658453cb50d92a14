"""Twill's tokenizer.json reader against Hugging Face `tokenizers` itself,
for each family's pipeline as transformers' converters build it.

    python hf_tokenizer_oracle.py --bin BUILD/bin [--work DIR]

For each pipeline a BPE is trained with `tokenizers` on a small English and
code corpus (so that the varied corpus below meets characters it has not
seen), saved as tokenizer.json (merges as pairs, and in one pipeline as
"a b" strings), and Twill must give, on every text of a varied corpus
(scripts, emoji, code, whitespace runs, digits, special and added tokens
inside text), exactly the ids of `tokenizers`' encode(text,
add_special_tokens=False), decode them as `tokenizers`' decode does, and
give the text back where the pipeline is lossless. Text that is not UTF-8
is compared with what Python's decode(errors="replace") gives `tokenizers`.
The pipelines:

- qwen2: NFC, Qwen2's Split pattern, ByteLevel without its regex, ByteLevel
  decoder, added specials and a non-special added token (Qwen2Converter);
- llama3: Llama 3's Split pattern, ignore_merges (TikTokenConverter);
- llama2: SentencePiece BPE as LlamaConverter writes it (legacy): Prepend
  and Replace normalizers, byte fallback, a fused unknown token, the
  Replace/ByteFallback/Fuse/Strip decoder, a BOS template (Llama 2,
  Mistral 7B, Phi-3);
- metaspace: LlamaConverter non-legacy: Metaspace(prepend_scheme first);
- gemma: GemmaConverter: Replace normalizer, Split(" ", merged with
  previous), byte fallback;
- features: NFKC, Digits, GPT-2's ByteLevel regex with a prefix space,
  added tokens that lstrip, rstrip, are single words or normalized;
- unknown: Metaspace splitting on its replacement, no byte fallback: an
  unfused unknown token for unseen characters, the Metaspace decoder;
- splits: a Replace normalizer by regex, Split's other behaviors (removed,
  merged with next, contiguous and inverted), runs of digits, a Strip
  decoder at the end;
- mistral_v3: a real vocabulary, Mistral 7B v0.3's SentencePiece model as
  mistral-common ships it, converted by transformers (Metaspace, byte
  fallback, its 771 control tokens added);
and Mistral's Tekken file (Mistral Nemo's) read as it is, against
mistral-common's own Tekkenizer.
"""
import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tokenizers import (Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers, AddedToken)

from tokenizer_oracle import SAMPLES, random_text

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                 r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                  r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
                  r"\s+(?!\S)|\s+")

TRAINING = [
    "The quick brown fox jumps over the lazy dog. It's a fine day, isn't it?",
    "def train(model, data):\n    for batch in data:\n        loss = model(batch)\n"
    "        loss.backward()\n    return model\n",
    "Numbers like 12, 345 and 6789 appear in text; so do dates: 2026-12-04.",
    "I'm sure they'll come. We'd go if we could. You've seen it, haven't you?",
    "    indented lines\n\ttabs\n\n\nand blank lines between paragraphs.\n",
    "Café, naïve and résumé are words with accents.",
]


def train(model, normalizer, pre_tokenizer, decoder, specials, alphabet=(),
          vocab_size=400):
    tokenizer = Tokenizer(model)
    if normalizer:
        tokenizer.normalizer = normalizer
    if pre_tokenizer:
        tokenizer.pre_tokenizer = pre_tokenizer
    if decoder:
        tokenizer.decoder = decoder
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  special_tokens=specials,
                                  initial_alphabet=list(alphabet),
                                  show_progress=False)
    tokenizer.train_from_iterator(TRAINING * 4, trainer)
    return tokenizer


def with_byte_fallback(tokenizer, unknown="<unk>"):
    """The trained model's vocabulary with SentencePiece's <0xXX> tokens and
    byte_fallback on, a fused unknown token."""
    data = json.loads(tokenizer.to_str())
    vocab = data["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    data["model"].update(byte_fallback=True, fuse_unk=True, unk_token=unknown)
    return Tokenizer.from_str(json.dumps(data))


def pipelines():
    """name -> (tokenizer, lossless)"""
    made = {}
    byte_level = pre_tokenizers.ByteLevel.alphabet()

    qwen2 = train(models.BPE(), normalizers.NFC(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        decoders.ByteLevel(), ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        byte_level)
    qwen2.add_tokens([AddedToken("<tool_call>", special=False,
                                 normalized=False)])
    qwen2.post_processor = processors.ByteLevel(trim_offsets=False)
    made["qwen2"] = (qwen2, False)  # NFC changes some text

    llama3 = train(models.BPE(ignore_merges=True), None,
                   pre_tokenizers.Sequence([
                       pre_tokenizers.Split(Regex(LLAMA3_PATTERN),
                                            behavior="isolated"),
                       pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                use_regex=False)]),
                   decoders.ByteLevel(),
                   ["<|begin_of_text|>", "<|eot_id|>"], byte_level)
    made["llama3"] = (llama3, True)

    sentencepiece_decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
        decoders.Strip(content=" ", left=1)])
    llama2 = with_byte_fallback(train(
        models.BPE(unk_token="<unk>"), normalizers.Sequence([
            normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")]),
        None, sentencepiece_decoder, ["<unk>", "<s>", "</s>"]))
    llama2.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)])
    made["llama2"] = (llama2, False)  # a leading space is not kept

    metaspace = with_byte_fallback(train(
        models.BPE(unk_token="<unk>"), None,
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                 split=False),
        sentencepiece_decoder, ["<unk>", "<s>", "</s>"]))
    made["metaspace"] = (metaspace, False)

    gemma = with_byte_fallback(train(
        models.BPE(unk_token="<unk>"), normalizers.Replace(" ", "▁"),
        pre_tokenizers.Split(" ", "merged_with_previous"),
        decoders.Sequence([decoders.Replace("▁", " "),
                           decoders.ByteFallback(), decoders.Fuse()]),
        ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>",
         "<end_of_turn>"]))
    made["gemma"] = (gemma, True)

    features = train(models.BPE(), normalizers.NFKC(), pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True),
         pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
        decoders.ByteLevel(), ["<|sep|>"], byte_level)
    features.add_special_tokens([
        AddedToken("[MASK]", lstrip=True, rstrip=True),
        AddedToken("<word>", single_word=True)])
    features.add_tokens([AddedToken("ﬁne", normalized=True),
                         AddedToken("lazy dog", normalized=False)])
    made["features"] = (features, False)

    unknown = train(models.BPE(unk_token="<unk>"), None,
                    pre_tokenizers.Metaspace(replacement="▁",
                                             prepend_scheme="always",
                                             split=True),
                    decoders.Metaspace(replacement="▁",
                                       prepend_scheme="always"),
                    ["<unk>"])
    made["unknown"] = (unknown, False)

    splits = train(models.BPE(), normalizers.Replace(Regex(r"\s+"), " "),
                   pre_tokenizers.Sequence([
                       pre_tokenizers.Split(Regex(r"[.!?]"), "removed"),
                       pre_tokenizers.Split(" ", "merged_with_next"),
                       pre_tokenizers.Split(Regex(r"[aeiou]+"), "contiguous",
                                            invert=True),
                       pre_tokenizers.Digits(individual_digits=False),
                       pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                use_regex=False)]),
                   decoders.Sequence([decoders.Strip(content="Ġ", left=0,
                                                     right=1),
                                      decoders.ByteLevel()]),
                   [], byte_level)
    made["splits"] = (splits, False)
    made["mistral_v3"] = (mistral_v3(), False)
    return made


def mistral_v3():
    """Mistral 7B v0.3's real tokenizer: the SentencePiece model
    mistral-common ships (32768 pieces, its control tokens), as transformers
    converts it to a tokenizer.json (Metaspace, byte fallback, 771 added
    tokens)."""
    import mistral_common
    from transformers import AutoTokenizer
    folder = Path(tempfile.mkdtemp())
    shutil.copy(Path(mistral_common.__file__).parent / "data" /
                "mistral_instruct_tokenizer_240323.model.v3",
                folder / "tokenizer.model")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "legacy": True,
         "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}))
    return AutoTokenizer.from_pretrained(folder).backend_tokenizer


def corpus():
    rng = random.Random(1)
    extra = ["[MASK] in the middle, a[MASK]b, <word> alone and in<word>s",
             "a ﬁne day, ﬁnely; lazy dogs and the lazy dog. <tool_call>x",
             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
             "<s>text</s> <start_of_turn>user\nhello<end_of_turn>",
             "①②③ ＡＢＣ ﬃ ℌ 12345 ٣٤٥ ½", "  two  spaces  ", "▁already▁"]
    texts = SAMPLES + extra + [random_text(rng, rng.randint(10, 300))
                               for _ in range(60)]
    texts.append("\n\n".join(texts))
    return texts


def check_tekken(bin_dir, texts):
    """Mistral's Tekken file (Mistral Nemo's, as mistral-common ships it)
    against mistral-common's own Tekkenizer: special tokens in text are
    text there, as with --no-special."""
    import mistral_common
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    path = Path(mistral_common.__file__).parent / "data" / "tekken_240911.json"
    reference = Tekkenizer.from_file(path)
    lines = "".join(json.dumps(text) + "\n" for text in texts)
    actual = [[int(t) for t in line.split()] for line in
              twill(bin_dir, path, "--lines", "--no-special",
                    stdin=lines.encode()).split("\n")[:len(texts)]]
    decoded = [json.loads(line) for line in twill(
        bin_dir, path, "--lines", "--decode",
        stdin="".join(json.dumps(ids) + "\n" for ids in actual).encode())
        .split("\n")[:len(texts)]]
    failures = 0
    for text, ids, ours in zip(texts, actual, decoded):
        expected = reference.encode(text, bos=False, eos=False)
        if ids != expected or ours != reference.decode(ids):
            failures += 1
            print(f"FAIL tekken: {text[:50]!r}: {ids[:6]} vs {expected[:6]}, "
                  f"decoded {ours[:30]!r}")
    print(f"tekken: {len(texts) - failures} of {len(texts)} texts' ids "
          f"identical to mistral-common's")
    return failures


def twill(bin_dir, path, *args, stdin):
    run = subprocess.run([bin_dir / "twill-tokenize", "--tokenizer", str(path),
                          *args], input=stdin, capture_output=True)
    if run.returncode:
        sys.exit(f"twill-tokenize failed: {run.stderr.decode()}")
    return run.stdout.decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    texts = corpus()
    invalid = [b"ok \xff\xfe bad", b"cut \xe2\x82", b"\xf0\x9f\x9a\x80 ok \xc3",
               b"lone \x80 continuation, overlong \xc0\xaf, surrogate "
               b"\xed\xa0\x80."]
    failures, compared = 0, 0
    for name, (reference, lossless) in pipelines().items():
        path = work / f"{name}.json"
        reference.save(str(path))
        if name == "qwen2":  # merges as "left right" strings, the older form
            data = json.loads(path.read_text())
            data["model"]["merges"] = [" ".join(pair) if isinstance(pair, list)
                                       else pair
                                       for pair in data["model"]["merges"]]
            path.write_text(json.dumps(data, ensure_ascii=False))
        expected = [reference.encode(text, add_special_tokens=False).ids
                    for text in texts]
        lines = "".join(json.dumps(text) + "\n" for text in texts)
        actual = [[int(t) for t in line.split()] for line in
                  twill(args.bin, path, "--lines",
                        stdin=lines.encode()).split("\n")[:len(texts)]]
        wrong = [i for i, (a, e) in enumerate(zip(actual, expected)) if a != e]
        compared += sum(len(ids) for ids in expected)
        for i in wrong[:3]:
            first = next((k for k, (a, e) in enumerate(zip(actual[i],
                                                           expected[i]))
                          if a != e), min(len(actual[i]), len(expected[i])))
            print(f"FAIL {name}: {texts[i][:50]!r} differs at token {first}: "
                  f"{actual[i][first:first + 4]} vs "
                  f"{expected[i][first:first + 4]} "
                  f"({[reference.id_to_token(t) for t in expected[i][first:first + 4]]})")
        failures += len(wrong)

        decoded = [json.loads(line) for line in twill(
            args.bin, path, "--lines", "--decode",
            stdin="".join(json.dumps(ids) + "\n"
                          for ids in expected).encode()).split("\n")[:len(texts)]]
        for text, ids, ours in zip(texts, expected, decoded):
            theirs = reference.decode(ids, skip_special_tokens=False)
            # (A ▁ in text decodes as a space where ▁ stands for spaces.)
            if ours != theirs or (lossless and "▁" not in text and
                                  ours != text):
                failures += 1
                print(f"FAIL {name}: decoding {text[:40]!r} gave {ours[:40]!r}"
                      f", tokenizers {theirs[:40]!r}")
        for raw in invalid:
            want = reference.encode(raw.decode("utf-8", "replace"),
                                    add_special_tokens=False).ids
            got = [int(t) for t in twill(args.bin, path, stdin=raw).split()]
            if got != want:
                failures += 1
                print(f"FAIL {name}: invalid UTF-8 {raw!r}: {got} vs {want}")
        print(f"{name}: {len(texts) - len(wrong)} of {len(texts)} texts' ids "
              f"identical, decoded as tokenizers decodes")
    failures += check_tekken(args.bin, texts)
    print(f"{compared} tokens compared; {failures} failures")
    print("PASS" if failures == 0 else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
