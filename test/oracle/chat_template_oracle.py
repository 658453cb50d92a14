"""Twill's chat templates against transformers' rendering (Jinja, as
apply_chat_template compiles it: trim_blocks, lstrip_blocks, its tojson and
raise_exception), for each family's style of template.

    python chat_template_oracle.py --bin BUILD/bin

The templates (test/oracle/chat_templates/) are written in the style of
the families' own: Llama 3 and 3.1, Qwen 2.5 and 3 (ChatML; Qwen3's
namespace, reversed walk and <think> parsing), Mistral (system folded
into the last user turn, roles that must alternate), Gemma 3 (system as a
prefix, whitespace control everywhere, content parts), Phi-3, one of
Jinja's whitespace rules and the rest of the subset, and one of numbers
(floats printed as Python prints them, in text and tojson's tool
arguments; literals with exponents and underscores). Each is rendered for
50 conversations (with and without a system message, one to five turns,
with and without the generation prompt): Twill's text must be transformers'
exactly; where the template raises, Twill must refuse with the template's
message.
"""
import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATES = Path(__file__).parent / "chat_templates"
CONTENTS = ["Hi there!", "  What is 2+2?\n", "4", "Tell me a story.",
            "Once upon a time…", "Write code:\n```py\nprint('x')\n```",
            "<think>\nreasoning here\n</think>\n\nThe answer.", "日本語で？",
            "emoji 🚀🔥", "quotes ' and \" and \\ and {{ braces }}", "",
            " spaces around ", "multi\nline\n\ntext"]


def conversations(rng, count):
    for _ in range(count):
        messages = []
        if rng.random() < 0.5:
            messages.append({"role": "system",
                             "content": rng.choice(["You are terse.",
                                                    " Be kind. ", ""])})
        for turn in range(rng.randint(1, 5)):
            role = "user" if turn % 2 == 0 else "assistant"
            messages.append({"role": role, "content": rng.choice(CONTENTS)})
        if rng.random() < 0.1:  # roles out of order: templates may raise
            messages.append({"role": messages[-1]["role"], "content": "again"})
        yield messages, rng.random() < 0.5


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(0)
    cases = list(conversations(rng, 50))
    failures = raised = 0
    for template in sorted(TEMPLATES.glob("*.jinja")):
        source = template.read_text()
        for messages, generation in cases:
            variables = {"messages": messages,
                         "add_generation_prompt": generation,
                         "bos_token": "<s>", "eos_token": "</s>"}
            try:
                expected = render_jinja_template(
                    conversations=[messages], chat_template=source,
                    add_generation_prompt=generation, bos_token="<s>",
                    eos_token="</s>")[0][0]
                error = None
            except Exception as exception:  # the template raised
                expected, error = None, str(exception)
            run = subprocess.run(
                [args.bin / "twill-tokenize", "--template", template],
                input=json.dumps(variables).encode(), capture_output=True)
            actual = run.stdout.decode()
            if error is not None:
                raised += 1
                if run.returncode == 0 or error not in run.stderr.decode():
                    failures += 1
                    print(f"FAIL {template.name}: transformers raised "
                          f"{error!r}; twill: {run.stderr.decode()!r}")
                continue
            if run.returncode != 0 or actual != expected:
                failures += 1
                print(f"FAIL {template.name}: {messages}\n  expected "
                      f"{expected!r}\n  twill    {actual!r} "
                      f"{run.stderr.decode()}")
        print(f"{template.name}: {len(cases)} conversations")
    print(f"{raised} raised as transformers raised; {failures} failures")
    print("PASS" if failures == 0 else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
