"""Prints SAME when two runs' metrics.jsonl hold STEPS steps with the same
figures, else DIFFERENT and both; with --text, when two printouts (twill-train
--eval's) have the same lines but for their numbers, and the same numbers.

    python same_metrics.py FIRST SECOND STEPS [--keys k,...] [--within REL]
    python same_metrics.py FIRST SECOND --text [--within REL]

Exact by default, for two runs of one program on the same micro-batches (a
straight run and a resumed one): the cpu backend's reductions run in an
order fixed by the shapes and the thread count, so the second run repeats
the first's computation. Two programs that compute the same values by
other routes (a reference precomputed against one computed in every step:
other GEMM shapes, so another blocking of their sums) agree to rounding:
--within REL allows |a - b| <= REL * max(1, |b|) per figure.
"""
import argparse
import json
import re

NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("steps", type=int, nargs="?")
    parser.add_argument("--text", action="store_true")
    parser.add_argument("--keys", default="loss")
    parser.add_argument("--within", type=float, default=0.0)
    args = parser.parse_args()
    keys = args.keys.split(",")

    def figures(path):
        with open(path) as lines:
            if args.text:
                return [[re.sub(NUMBER, "#", line)] + [
                    float(x) for x in re.findall(NUMBER, line)]
                    for line in lines]
            return [[json.loads(line)[key] for key in keys] for line in lines]

    def close(x, y):
        if isinstance(x, str) or isinstance(y, str):
            return x == y
        return abs(x - y) <= args.within * max(1.0, abs(y))

    a, b = figures(args.first), figures(args.second)
    same = (len(a) == len(b) and (args.text or len(a) == args.steps)
            and all(len(row_a) == len(row_b) and all(map(close, row_a, row_b))
                    for row_a, row_b in zip(a, b)))
    print("SAME" if same else f"DIFFERENT {keys}\n{a}\n{b}")


if __name__ == "__main__":
    main()
