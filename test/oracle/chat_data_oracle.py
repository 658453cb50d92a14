"""Chat data in each family's format, against transformers: the tokens of
apply_chat_template and the label mask of the assistant turns.

    python chat_data_oracle.py --bin BUILD/bin --work DIR

For each family's template (test/oracle/chat_templates/) with a tokenizer
of the family's pipeline (hf_tokenizer_oracle's, the template's markers
added as special tokens; Mistral's real one), saved by transformers as a
model folder (tokenizer.json, tokenizer_config.json with the template and
its special tokens), 50 conversations (a system message or not, one to
three exchanges, contents with whitespace, code, emoji, <think> blocks and
empty ones; for Qwen 2.5's, 10 more whose answers call a tool, with the
line's tools) go through `twill-tokenize --model DIR --data FILE`, the
examples twill-train trains on:

- with --train-on-input, every conversation's ids must be transformers'
  apply_chat_template(messages, tokenize=True), every token trained;
- without it, each conversation alone: the labels must be the ids of the
  tokens whose text starts inside an assistant turn, found here by
  character offsets (tokenizers' offset mapping): from the end of the
  messages before it rendered with the generation prompt to its end of
  turn, the last special token of the messages up to it rendered alone
  where they start the whole text, else the first special token after its
  start (Phi-3's markers strip the whitespace after them, as its
  tokenizer's do); where the turn cannot be found that way
  (the template renders the earlier messages otherwise than as the start,
  a token crosses an edge, no special token ends it), Twill must refuse
  the conversation, and refusals must stay the exception.
"""
import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).parent))
from chat_template_oracle import CONTENTS, TEMPLATES  # noqa: E402
from hf_tokenizer_oracle import pipelines  # noqa: E402

LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
# template: (pipeline, special tokens it writes, other added tokens, the
# tokenizer_config's special tokens)
FAMILIES = {
    "llama3": ("llama3", ["<|start_header_id|>", "<|end_header_id|>"], [],
               LLAMA3),
    "llama3_1": ("llama3", ["<|start_header_id|>", "<|end_header_id|>"], [],
                 LLAMA3),
    "qwen2_5": ("qwen2", [], [], QWEN),
    "qwen3": ("qwen2", [], ["<think>", "</think>"], QWEN),
    "mistral": ("mistral_v3", [], [],
                {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "gemma3": ("gemma", [], [],
               {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"}),
    "phi3": ("llama2", ["<|user|>", "<|assistant|>", "<|system|>", "<|end|>"],
             [], {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
}


def conversations(rng, count):
    """Conversations every family's template takes: user and assistant
    alternating, an answer last."""
    for _ in range(count):
        messages = []
        if rng.random() < 0.4:
            messages.append({"role": "system",
                             "content": rng.choice(["You are terse.",
                                                    " Be kind. "])})
        for _ in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": rng.choice(CONTENTS)})
            messages.append({"role": "assistant",
                             "content": rng.choice(CONTENTS)})
        yield messages


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "required": ["city"], "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}}}}]


def tool_conversations(rng, count):
    """Answers that call a tool (content empty, absent or null; arguments
    with their keys out of alphabetical order) and its result, with the
    tools: lines as twill-train reads them, {"messages", "tools"}."""
    for _ in range(count):
        call = {"role": "assistant", "tool_calls": [{
            "type": "function", "function": {
                "name": "get_weather",
                "arguments": {"unit": rng.choice(["c", "f"]),
                              "city": rng.choice(["Paris", "東京"])}}}]}
        content = rng.choice(["absent", None, "", "Let me check."])
        if content != "absent":
            call["content"] = content
        messages = [{"role": "user", "content": rng.choice(CONTENTS[:6])},
                    call, {"role": "tool", "content": '{"temp": 21}'},
                    {"role": "assistant", "content": "It is 21°C."}]
        yield {"messages": messages, "tools": TOOLS}


def model_folder(work, name, made):
    pipeline, specials, others, tokens = FAMILIES[name]
    backend = Tokenizer.from_str(made[pipeline][0].to_str())
    # Phi-3's markers take the whitespace after them (rstrip), as its
    # tokenizer.json has them.
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False,
                                           rstrip=name == "phi3")
                                for t in specials])
    backend.add_tokens([AddedToken(t, special=False, normalized=False)
                        for t in others])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **tokens)
    tokenizer.chat_template = (TEMPLATES / f"{name}.jinja").read_text()
    folder = work / name
    tokenizer.save_pretrained(folder)
    return tokenizer, folder


def reference(tokenizer, messages, tools=None):
    """The ids and labels by offsets, or None where Twill must refuse."""
    def text(part, generation):
        return tokenizer.apply_chat_template(
            part, tools=tools, tokenize=False,
            add_generation_prompt=generation)
    full = text(messages, False)
    added = tokenizer.backend_tokenizer.get_added_tokens_decoder()
    specials = [token.content for token in added.values() if token.special]
    spans = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = text(messages[:index], True)
        begin = len(prompt)
        if not full.startswith(prompt) or begin < (spans[-1][1] if spans
                                                   else 0):
            return None
        # The end of turn: the last special token of the messages up to it
        # where they start the whole text, else the first after its start.
        up_to = text(messages[:index + 1], False)
        alone = full.startswith(up_to) and len(up_to) > begin
        limit = len(up_to) if alone else len(full)
        end, at = None, begin
        while at < limit and (alone or end is None):
            match = max((len(s) for s in specials if full.startswith(s, at)),
                        default=0)
            if match:
                end = at + match
            at += match or 1
        if end is None and alone:
            end = limit
        if end is None:
            return None
        spans.append((begin, end))
    encoded = tokenizer(full, add_special_tokens=False,
                        return_offsets_mapping=True)
    labels = []
    for token, (start, end) in zip(encoded["input_ids"],
                                   encoded["offset_mapping"]):
        for begin, stop in spans:
            # A token across a turn's edge, unless an added one whose
            # stripped whitespace the edge is in: it counts before it.
            if token not in added and (start < begin < end or
                                       start < stop < end):
                return None
        labels.append(token if any(begin <= start < stop
                                   for begin, stop in spans) else -100)
    return encoded["input_ids"], labels


def twill(args, folder, data, *flags):
    return subprocess.run(
        [args.bin / "twill-tokenize", "--model", folder, "--data", data,
         *flags], capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    made = pipelines()
    plain = [{"messages": m} for m in conversations(random.Random(2), 50)]
    tools = list(tool_conversations(random.Random(3), 10))
    failures, refused, checked = [], 0, 0
    for name in FAMILIES:
        tokenizer, folder = model_folder(args.work, name, made)
        # Qwen's template writes tool calls and tools.
        cases = plain + (tools if name == "qwen2_5" else [])
        data = args.work / f"{name}.jsonl"
        data.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n"
                                for line in cases))
        everything = twill(args, folder, data, "--train-on-input")
        if everything.returncode:
            failures.append(f"{name}: {everything.stderr.strip()}")
            continue
        rows = [json.loads(line) for line in everything.stdout.splitlines()]
        for number, (line, row) in enumerate(zip(cases, rows)):
            expected = tokenizer.apply_chat_template(
                line["messages"], tools=line.get("tools"), tokenize=True)
            if hasattr(expected, "keys"):  # a BatchEncoding
                expected = expected["input_ids"]
            if row["input_ids"] != list(expected) or \
                    row["labels"] != row["input_ids"]:
                failures.append(f"{name} #{number}: ids {row['input_ids']} "
                                f"!= {list(expected)}")
        if len(rows) != len(cases):
            failures.append(f"{name}: {len(rows)} rows of {len(cases)}")
        family_refused = 0
        for number, line in enumerate(cases):
            messages = line["messages"]
            one = args.work / f"{name}-{number}.jsonl"
            one.write_text(json.dumps(line, ensure_ascii=False) + "\n")
            result = twill(args, folder, one)
            want = reference(tokenizer, messages, line.get("tools"))
            checked += 1
            if want is None:
                family_refused += 1
                if result.returncode == 0:
                    failures.append(f"{name} #{number}: Twill took a "
                                    f"conversation whose turns it cannot "
                                    f"tell apart: {messages}")
                continue
            if result.returncode:
                failures.append(f"{name} #{number}: refused: "
                                f"{result.stderr.strip()}")
                continue
            row = json.loads(result.stdout)
            if (row["input_ids"], row["labels"]) != (list(want[0]), want[1]):
                failures.append(f"{name} #{number}: labels {row['labels']} "
                                f"!= {want[1]}")
        refused += family_refused
        print(f"{name}: {len(cases)} conversations, ids equal to "
              f"apply_chat_template's; {len(cases) - family_refused} "
              f"masks equal, {family_refused} refused as the offsets say",
              flush=True)
    # The masks must be the rule, not the exception.
    if refused > checked // 5:
        failures.append(f"{refused} of {checked} conversations refused")
    for failure in failures[:20]:
        print("FAIL", failure)
    if failures:
        sys.exit(f"{len(failures)} failures")


if __name__ == "__main__":
    main()
