"""Preference data (DPO's pairs) against TRL's DPOTrainer: the prompt,
chosen and rejected ids it trains on.

    python preference_data_oracle.py --bin BUILD/bin --work DIR

For three families' tokenizers and chat templates (chat_data_oracle's
model folders: Llama 3, Qwen 2.5, Mistral), four files of 12 pairs each go
through `twill-tokenize --model DIR --data FILE --format preference
--max-length 90` (640 for Qwen's conversations): plain strings with a
prompt and without one (TRL's extract_prompt finds it), conversations
with a prompt and without one; contents with whitespace, code, emoji and
empty completions, one prompt too long to keep; Qwen's conversations with
the tools its template writes on every other line. TRL's
DPOTrainer._prepare_dataset (its tokenization, the eos_token it appends to
string completions, the prompt's ids cut where prompt and prompt +
completion diverge, and the pairs dropped because their prompt fills
max_length) must give the same pairs, id for id. Lines TRL cannot train
on (no "rejected", strings mixed with conversations, no shared start
without a prompt, a number for a completion) must be refused, naming
their line.
"""
import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from datasets import Dataset
from trl import DPOConfig, DPOTrainer

sys.path.insert(0, str(Path(__file__).parent))
from chat_data_oracle import TOOLS, model_folder  # noqa: E402
from chat_template_oracle import CONTENTS  # noqa: E402
from hf_tokenizer_oracle import pipelines  # noqa: E402

FAMILIES = ["llama3", "qwen2_5", "mistral"]
MAX_LENGTH = 90


def pairs(rng, count, conversation, explicit):
    """Preference lines: prompt (or none: a shared start), chosen and
    rejected that differ."""
    for number in range(count):
        prompt = rng.choice(CONTENTS[:10]) + f" #{number}"
        if number == count - 1:  # a prompt that fills max_length
            prompt = " ".join(CONTENTS * 2)
        chosen, rejected = rng.sample(CONTENTS, 2)
        if not conversation:
            if explicit:
                yield {"prompt": prompt, "chosen": chosen,
                       "rejected": rejected}
            else:  # differing from their first character on
                yield {"chosen": prompt + " Yes: " + chosen,
                       "rejected": prompt + " No: " + rejected}
            continue
        context = [{"role": "user", "content": prompt}]
        if number % 3 == 0:
            context = [{"role": "system", "content": "Be brief."}] + context
        answers = [[{"role": "assistant", "content": text or "ok"}]
                   for text in (chosen, rejected)]
        if explicit:
            yield {"prompt": context, "chosen": answers[0],
                   "rejected": answers[1]}
        else:
            yield {"chosen": context + answers[0],
                   "rejected": context + answers[1]}


def trl_pairs(tokenizer, lines, max_length):
    """What DPOTrainer trains on: its _prepare_dataset of the lines."""
    with tempfile.TemporaryDirectory() as out:
        config = DPOConfig(output_dir=out, max_length=max_length,
                           report_to=[], use_cpu=True, bf16=False)
        trainer = SimpleNamespace(_tokenizer=tokenizer)
        # Every row has every column (from_list takes the first row's).
        keys = {key for line in lines for key in line}
        rows = [{key: line.get(key) for key in keys} for line in lines]
        dataset = DPOTrainer._prepare_dataset(
            trainer, Dataset.from_list(rows), tokenizer, config, "train")
    return [{key: list(row[key]) for key in
             ("prompt_ids", "chosen_ids", "rejected_ids")} for row in dataset]


def twill(args, folder, data, max_length=MAX_LENGTH):
    return subprocess.run(
        [args.bin / "twill-tokenize", "--model", folder, "--data", data,
         "--format", "preference", "--max-length", str(max_length)],
        capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    made = pipelines()
    failures = []
    for name in FAMILIES:
        tokenizer, folder = model_folder(args.work, name, made)
        for conversation in (False, True):
            for explicit in (True, False):
                kind = (f"{name} {'conversations' if conversation else 'strings'}"
                        f" {'with' if explicit else 'without'} a prompt")
                lines = list(pairs(random.Random(len(kind)), 12, conversation,
                                   explicit))
                max_length = MAX_LENGTH
                if conversation and name == "qwen2_5":
                    # Qwen's template writes the tools, every other line's:
                    # as a JSON string, TRL's form (a list would reach it
                    # through datasets' columns, each object given every
                    # key any has); room for their prompts.
                    for line in lines[1::2]:
                        line["tools"] = json.dumps(TOOLS)
                    max_length = 640
                data = args.work / f"{kind.replace(' ', '-')}.jsonl"
                data.write_text("".join(json.dumps(line, ensure_ascii=False)
                                        + "\n" for line in lines))
                run = twill(args, folder, data, max_length)
                if run.returncode:
                    failures.append(f"{kind}: {run.stderr.strip()}")
                    continue
                ours = [json.loads(line) for line in run.stdout.splitlines()]
                theirs = trl_pairs(tokenizer, lines, max_length)
                same = sum(a == b for a, b in zip(ours, theirs))
                print(f"{kind}: {same} of {len(theirs)} pairs TRL's "
                      f"({len(lines) - len(theirs)} dropped by TRL; "
                      f"{run.stderr.strip()})")
                if len(ours) != len(theirs) or same != len(theirs):
                    bad = next((i for i, (a, b) in enumerate(zip(ours, theirs))
                                if a != b), None)
                    failures.append(
                        f"{kind}: {len(ours)} pairs against TRL's "
                        f"{len(theirs)}" + ("" if bad is None else
                                            f"; first different #{bad}: "
                                            f"{ours[bad]} != {theirs[bad]}"))
    # Lines TRL cannot train on are refused, by their line.
    folder = args.work / FAMILIES[0]
    good = '{"prompt": "a", "chosen": "b", "rejected": "c"}\n'
    for bad, message in (
            ('{"prompt": "a", "chosen": "b"}', "no 'rejected'"),
            ('{"prompt": "a", "chosen": "b", "rejected": [{"role": "user", '
             '"content": "c"}]}', "must all be strings or all conversations"),
            ('{"chosen": "yes", "rejected": "no"}',
             "must start with the same text and then differ"),
            ('{"prompt": "a", "chosen": 3, "rejected": "c"}',
             "'chosen' must be a string or a list")):
        data = args.work / "bad.jsonl"
        data.write_text(good + bad + "\n")
        run = twill(args, folder, data)
        refused = (run.returncode != 0 and ":2:" in run.stderr
                   and message in run.stderr)
        print(f"{bad}: {'refused' if refused else 'NOT refused'}: "
              f"{run.stderr.strip()}")
        if not refused:
            failures.append(f"{bad} was not refused with \"{message}\" by "
                            f"its line")
    for failure in failures:
        print("FAIL", failure)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
