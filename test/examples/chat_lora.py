"""README's first real job, run as written: the shell block after the
`test/examples/chat_lora.py` marker, each command as it is, in a copy of the
repository's example (build/ and .venv/ linked in), then the figures the
README states: held-out accuracy from nothing to most, the 2 x 2 run close
to the single rank, and PEFT's answer the colour the data gives.

    python chat_lora.py --source REPO --build BUILD --work DIR
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

MARKER = "<!-- test/examples/chat_lora.py runs the next block as written -->"
EXAMPLE = Path("examples/chat-lora")


def readme_commands(readme):
    """The commands of the marked block, continuation lines joined."""
    text = readme.read_text()
    if MARKER not in text:
        sys.exit(f"{readme}: no line '{MARKER}'")
    block = text.split(MARKER, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = block.replace("\\\n", " ").splitlines()
    return [c for c in commands if c.strip() and not c.startswith("#")]


def checkout(source, build, work):
    """A folder laid out as the repository: the example copied (nothing it
    generated), build/ and .venv/ linked."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source / EXAMPLE, work / EXAMPLE, ignore=shutil.ignore_patterns(
        "model", "output*", "__pycache__"))
    (work / "build").symlink_to(build.resolve())
    if sys.prefix != sys.base_prefix:  # the oracles' virtual environment
        (work / ".venv").symlink_to(Path(sys.prefix).resolve())
    else:
        (work / ".venv/bin").mkdir(parents=True)
        (work / ".venv/bin/python").symlink_to(sys.executable)


def run(command, cwd):
    print(f"$ {command}", flush=True)
    done = subprocess.run(["bash", "-c", command], cwd=cwd, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    print(done.stdout, flush=True)
    if done.returncode != 0:
        sys.exit(f"FAIL: exit {done.returncode}: {command}")
    return done.stdout


def accuracy(log):
    found = re.search(r"eval next-token accuracy ([0-9.]+)% -> ([0-9.]+)%",
                      log)
    if not found:
        sys.exit("FAIL: no 'eval next-token accuracy' line")
    return float(found[1]), float(found[2])


def final_loss(log):
    losses = re.findall(r"^step \d+/\d+ \| loss ([0-9.]+)", log, re.M)
    if not losses:
        sys.exit("FAIL: no step lines")
    return float(losses[-1])


def expected_answer(work, question):
    """The eval data's answer to the planet the question names."""
    planet = re.search(r"planet (\w+)\?", question)[1]
    for line in open(work / EXAMPLE / "eval.jsonl"):
        messages = json.loads(line)["messages"]
        if messages[1]["content"].endswith(f"planet {planet}?"):
            return messages[2]["content"]
    sys.exit(f"FAIL: no eval conversation asks about {planet}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--build", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    commands = readme_commands(args.source / "README.md")
    kinds = ["make_model.py", "twill train", "parallel.dp=2", "generate.py"]
    if len(commands) != 4 or not all(k in c for k, c in zip(kinds, commands)):
        sys.exit(f"FAIL: README's block is not make_model, train, train "
                 f"2x2, generate: {commands}")
    checkout(args.source, args.build, args.work)
    logs = [run(command, args.work) for command in commands]

    for name, log in (("1 rank", logs[1]), ("2x2", logs[2])):
        before, after = accuracy(log)
        print(f"{name}: accuracy {before}% -> {after}%, final loss "
              f"{final_loss(log)}")
        if not (before < 20 and after >= 80):
            sys.exit(f"FAIL: {name}: accuracy {before}% -> {after}%")
    one, mesh = final_loss(logs[1]), final_loss(logs[2])
    if abs(one - mesh) > 0.05:
        sys.exit(f"FAIL: final loss 2x2 {mesh} against 1 rank {one}")
    question = re.search(r'"([^"]+)"', commands[3])[1]
    answer, expected = logs[3].strip().splitlines()[-1], \
        expected_answer(args.work, question)
    if answer != expected:
        sys.exit(f"FAIL: PEFT answered {answer!r} to {question!r}, the data "
                 f"says {expected!r}")
    print(f"PASS: PEFT answered {answer!r}")


if __name__ == "__main__":
    main()
