"""Writes a copy of a config.json with keys set or removed, for the tests of
what a downloaded model folder may hold.

    python edit_config.py SOURCE DESTINATION [KEY=JSON | -KEY] ...

KEY=JSON sets KEY (dots reach into objects: rope_parameters.rope_theta=1)
to the JSON value; -KEY removes it.
"""
import json
import sys


def main():
    source, destination, *edits = sys.argv[1:]
    with open(source) as f:
        config = json.load(f)
    for edit in edits:
        remove = edit.startswith("-")
        path, _, value = edit.lstrip("-").partition("=")
        *parents, key = path.split(".")
        target = config
        for parent in parents:
            target = target.setdefault(parent, {})
        if remove:
            del target[key]
        else:
            target[key] = json.loads(value)
    with open(destination, "w") as f:
        json.dump(config, f, indent=2)


if __name__ == "__main__":
    main()
