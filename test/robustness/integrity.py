"""Programs and output folders that cannot be mixed up (issue 34): each case
failed before the program carried its checksum and what made it, and before
an output folder was held by one run at a time.

    python integrity.py --bin BUILD/bin --work DIR --data train.jsonl \
        --config tiny.textproto

- damaged programs: single-bit flips of a .twx are refused, naming it (they
  used to run, some to another adapter);
- stale programs: the launcher compiles again when the program beside the
  job was made by another twillc of the same size and time, from another
  job, or is truncated (it used to trust sizes and times), and refuses a
  device in its place;
- one run per folder: a second run into a folder a run holds is refused
  naming the first (both used to run, corrupting each other's log), and a
  fresh run into the folder of an earlier run's checkpoints or adapter is
  refused (they lay beside its own, for a later --resume to take, or were
  replaced) unless checkpoint.overwrite_output_dir, after which --resume
  of the folder takes the latest checkpoint of the run that saved last;
- output errors: a full disk under stdout, a profile or a plan is an error
  naming what could not be written (it used to be LLVM's fatal "IO failure
  on output stream"), and a device given as a file to write is refused
  (renaming over it replaced /dev/full, for root, with a file), and so is
  an output that is one of the command's inputs (it replaced the job, the
  data);
- bounded reads: a FIFO or a device as a tokenizer, job or cluster file is
  refused (a FIFO hung), and a data line longer than any example (36 MB),
  or of more JSON objects than any (1.9 million in 15 MB), is refused
  naming its line before it is parsed (each ran out of memory);
- a watched launch: `twill train` ends, saying why, when a rank hangs
  before MPI_Init or after the run has ended (mpirun waited forever).
"""
import fcntl
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from robustness import MPI_ENV, run_cases

FAST = ["train.epochs=1", "train.max_steps_per_epoch=2"]


def damaged_programs(s):
    program, _ = s.compile("sealed")
    good = program.read_bytes()
    damaged = s.work / "damaged.twx"
    rng = random.Random(34)
    ran = []
    for flip in range(20):
        data = bytearray(good)
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
        damaged.write_bytes(data)
        result = s.run([s.tool("twill-train"), damaged, "--eval"])
        if result.returncode != 1 or str(damaged) not in result.stderr:
            ran.append(f"byte {at}: exit {result.returncode} "
                       f"{result.stderr.strip()[-200:]}")
    s.check("20 bit flips of a program are each refused, naming it",
            not ran, "; ".join(ran))


# The launches of a case go into one folder again and again, each a fresh
# run over the one before.
OVER = "checkpoint.overwrite_output_dir=true"


def launch(s, bin_dir, out, *overrides, timeout=300):
    return s.run([bin_dir / "twill", "train", s.args.config,
                  f"checkpoint.output_dir={out}", f"data.path={s.args.data}",
                  OVER, *FAST, *overrides], timeout=timeout)


def stale_programs(s):
    # A copy of the tools, so that its twillc can be altered.
    bin_dir = s.work / "bin"
    bin_dir.mkdir()
    for tool in ("twill", "twillc", "twill-train"):
        shutil.copy2(s.tool(tool), bin_dir / tool)
    out = s.work / "stale-out"
    first = launch(s, bin_dir, out)
    s.check("a first launch compiles and trains", first.returncode == 0 and
            "compiling" in first.stdout, first.stderr[-300:])
    again = launch(s, bin_dir, out)
    s.check("... a second is up to date", "is up to date" in again.stdout,
            again.stdout[:300])

    # Another job's program put beside the job.
    program = out / "job.twx"
    foreign, _ = s.compile("foreign", "train.lr=0.5")
    shutil.copy(foreign, program)
    beside = launch(s, bin_dir, out)
    s.check("another job's program beside the job is compiled again",
            "compiled from another job" in beside.stdout, beside.stdout[:300])

    # A truncated program, and a device in its place.
    program.write_bytes(program.read_bytes()[:1000])
    truncated = launch(s, bin_dir, out)
    s.check("a truncated program is compiled again",
            "compiling" in truncated.stdout and truncated.returncode == 0,
            truncated.stdout[:300] + truncated.stderr[-300:])
    program.unlink()
    program.symlink_to("/dev/zero")
    s.expect("/dev/zero as the program is refused, naming it",
             launch(s, bin_dir, out, timeout=60),
             f"{program} is not a regular file")
    s.check("... and left alone", Path("/dev/zero").is_char_device())
    program.unlink()
    launch(s, bin_dir, out)

    # Another twillc of the same size and time: one byte of its help text.
    twillc = bin_dir / "twillc"
    stat = twillc.stat()
    data = twillc.read_bytes()
    at = data.index(b"Twill job compiler")
    twillc.write_bytes(data[:at] + b"twill" + data[at + 5:])
    os.utime(twillc, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    other = launch(s, bin_dir, out)
    s.check("another twillc of the same size and time compiles again",
            "another twillc compiled it" in other.stdout, other.stdout[:300])
    s.expect("twill-train refuses a device as its program",
             s.run([s.tool("twill-train"), "/dev/zero"], timeout=60),
             "/dev/zero is not a regular file")


def one_run_per_folder(s):
    out = s.work / "held-out"
    out.mkdir()
    program, _ = s.compile("held")
    shutil.copy(program, out / "job.twx")
    with open(out / ".twill-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("host elsewhere pid 4242 started 2026-01-01T00:00:00Z "
                   "token abc\n")
        lock.flush()
        s.expect("twill train into a held folder is refused, naming the run",
                 launch(s, s.args.bin, out), "is in use by another run",
                 "host elsewhere pid 4242")
        s.expect("... and so is twill-train",
                 s.train(out / "job.twx"), "is in use by another run")
        s.expect("... with another run's token too",
                 s.train(out / "job.twx", "--run-lock=abd"),
                 "is in use by another run")
    free = launch(s, s.args.bin, out)
    s.check("once the holder ends, the folder is free",
            free.returncode == 0, free.stderr[-300:])

    # Two real launches: the second, started while the first trains.
    first = subprocess.Popen(
        [s.tool("twill"), "train", s.args.config,
         f"checkpoint.output_dir={out}", f"data.path={s.args.data}", OVER,
         "train.epochs=200"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    deadline = time.time() + 60
    while time.time() < deadline and first.poll() is None:
        line = first.stdout.readline()
        if line.startswith("step "):
            break
    second = launch(s, s.args.bin, out)
    first.kill()
    first.communicate()
    s.expect("a second launch into a folder a run trains in is refused",
             second, "is in use by another run", f"pid {first.pid}")


def earlier_checkpoints(s):
    """A fresh run into the folder of another run's checkpoints or results:
    they lay beside its own, a later --resume took the other run's latest,
    and its adapter replaced the other's without a word."""
    program, out = s.compile("earlier", "train.epochs=1",
                             "train.max_steps_per_epoch=3",
                             "checkpoint.save_every=1")
    first = s.train(program)
    s.check("a run saves its checkpoints", first.returncode == 0 and
            (out / "step_2").is_dir(), first.stderr[-300:])
    s.expect("a fresh run into the folder of an earlier run's checkpoints "
             "is refused, naming them", s.train(program),
             f"{out} holds an earlier run's checkpoints (the latest: "
             "step_2), adapter_model.safetensors, metrics.jsonl",
             f"--resume {out}", "checkpoint.overwrite_output_dir=true")
    resumed = s.train(program, "--resume", out)
    s.check("... and resuming it is not", resumed.returncode == 0,
            resumed.stderr[-300:])

    # No checkpoints, only what the run saved at its end.
    program, out = s.compile("earlier-final", *FAST)
    s.train(program)
    s.expect("a fresh run into the folder of an earlier run's adapter is "
             "refused, naming it", s.train(program),
             f"{out} holds an earlier run's adapter_model.safetensors, "
             "metrics.jsonl, which a new run there would replace")

    # Asked to: a second run over the first's step_2..step_6 that stops at
    # step_4; --resume of the folder takes its own step_4, not step_6.
    program, out = s.compile("two-runs", "train.epochs=1",
                             "train.max_steps_per_epoch=7",
                             "checkpoint.save_every=2")
    s.train(program)
    second = s.work / "two-runs-second.twx"
    s.run([s.tool("twillc"), s.args.config, "train.epochs=1",
           "train.max_steps_per_epoch=5", "checkpoint.save_every=2",
           "train.lr=1e-3", "checkpoint.overwrite_output_dir=true",
           f"checkpoint.output_dir={out}", "-o", second])
    over = s.train(second)
    s.check("checkpoint.overwrite_output_dir starts a run over an earlier "
            "one, saying so", over.returncode == 0 and
            "holds an earlier run's checkpoints (the latest: step_6)" in
            over.stdout + over.stderr, (over.stdout + over.stderr)[-400:])
    resumed = s.train(second, "--resume", out)
    said = resumed.stdout + resumed.stderr
    s.check("a folder of two runs resumes the latest checkpoint of the run "
            "that saved last, naming the other's", resumed.returncode == 0
            and f"resuming from {out}/step_4: after step 4" in said and
            "the folder's step_6 is another run's" in said, said[-400:])


def output_errors(s):
    full = open("/dev/full", "w")
    root = s.args.config.parent.parent
    for name, command in (
            ("twillc --emit=config", [s.tool("twillc"), s.args.config,
                                      "--emit=config"]),
            ("twill --help", [s.tool("twill"), "--help"]),
            ("twill-train --help", [s.tool("twill-train"), "--help"]),
            ("twill-tokenize --help", [s.tool("twill-tokenize"), "--help"]),
            ("twill-opt --help", [s.tool("twill-opt"), "--help"])):
        result = subprocess.run([str(c) for c in command], stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=300)
        s.check(f"{name} into a full stdout fails, saying so",
                result.returncode == 1 and "LLVM ERROR" not in result.stderr
                and "cannot write standard output: No space left on device"
                in result.stderr, f"exit {result.returncode}: "
                f"{result.stderr.strip()[-300:]}")
    program, _ = s.compile("profiled", *FAST)
    s.expect("a profile onto a device is refused, naming it",
             s.train(program, "--profile", "/dev/full"),
             "/dev/full: cannot write: it is not a regular file")
    s.expect("a plan onto a device is refused, naming it",
             s.run([s.tool("twillc"), s.args.config, "--plan", "--cluster",
                    root / "clusters" / "h200x8.textproto", "-o",
                    "/dev/full"]), "/dev/full: cannot write")
    s.check("... and the device is left a device",
            not Path("/dev/full").is_file())
    # An output that is one of the inputs replaced it (the job, a cluster,
    # the training data), with exit 0.
    job = s.work / "own.textproto"
    shutil.copy(s.args.config, job)
    data = s.work / "own.jsonl"
    shutil.copy(s.args.data, data)
    for name, result, path in (
            ("twillc -o the job", s.run([s.tool("twillc"), job, "-o",
                                          s.work / "." / job.name]), job),
            ("twill-train --profile the data",
             s.train(program, "--profile", data, data=data), data)):
        s.expect(f"{name} is refused, naming both", result,
                 "which this command reads: writing it would destroy it")
    s.check("... and the job and the data are left as they were",
            job.read_bytes() == s.args.config.read_bytes() and
            data.read_bytes() == s.args.data.read_bytes())


def bounded_reads(s):
    fifo = s.work / "fifo"
    os.mkfifo(fifo)
    for name, path, command in (
            ("a FIFO as the tokenizer", fifo,
             [s.tool("twill-tokenize"), f"--tokenizer={fifo}"]),
            ("/dev/zero as the tokenizer", "/dev/zero",
             [s.tool("twill-tokenize"), "--tokenizer=/dev/zero"]),
            ("a FIFO as the job", fifo,
             [s.tool("twillc"), fifo, "--emit=config"]),
            ("a FIFO as the cluster", fifo,
             [s.tool("twillc"), s.args.config, "--plan", "--cluster", fifo]),
            ("a FIFO as twill-opt's input", fifo, [s.tool("twill-opt"), fifo])):
        result = subprocess.run([str(c) for c in command], input="hi\n",
                                capture_output=True, text=True, timeout=60)
        s.expect(name + " is refused, naming it", result,
                 f"{path}: it is not a regular file")
    weights = s.work / "fifo-weights"
    weights.mkdir()
    os.mkfifo(weights / "model.safetensors")
    s.expect("a FIFO as the weights is refused, naming it (it blocked)",
             s.train(s.compile("fifo", *FAST)[0], "--weights", weights,
                     timeout=60),
             "model.safetensors: cannot open: it is not a regular file")
    # Objects take kilobytes parsed: 1.9 million in a 15 MB line aborted
    # ("Allocation failed") under a 4 GiB address space.
    wide = s.work / "wide.jsonl"
    wide.write_text('{"messages": [' + ",".join(['{"a":0}'] * 1_900_000)
                    + "]}\n")
    program, _ = s.compile("wide", *FAST)
    limited = subprocess.run(
        [s.tool("twill-train"), str(program), "--data", str(wide)], capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: resource.setrlimit(
            resource.RLIMIT_AS, (4 << 30, 4 << 30)))
    s.expect("a line of 1.9 million JSON objects is refused, naming its line",
             limited, f"{wide}:1: JSON of more than 65536 objects")
    big = s.work / "big.jsonl"
    ids = [1] * 6_000_000
    big.write_text(f'{{"input_ids": {ids}, "labels": {ids}}}\n')
    program, _ = s.compile("bounded", *FAST)
    s.expect("a 36 MB line of data is refused, naming its line",
             s.train(program, data=big, timeout=120),
             f"{big}:1: a line of", "longer than the 16777216 one example")


def watched_launch(s):
    """A rank that hangs once it has ended (as one stuck in MPI_Finalize),
    or before MPI_Init (which keeps the others in theirs): mpirun waited for
    it forever, and so did `twill train`."""
    # The ranks must start within twice the collective timeout: where they
    # are to end normally it is 10 s (a start past 4 s, on a loaded 2-core
    # machine, would end the run before the hang at its end is reached).
    for hook, timeout, said in (
            ("TWILL_TEST_HANG_AT_END", 10,
             r"twill: rank \d ended with status 0 20 s \(twice "
             r"parallel.collective_timeout_s\) ago, and the launcher has not"),
            ("TWILL_TEST_HANG_AT_START", 2,
             r"twill: [01] of 2 ranks started within 4 s \(twice "
             r"parallel.collective_timeout_s\) of the launch")):
        out = s.work / f"watched-{hook[-3:].lower()}"
        started = time.time()
        result = s.run([s.tool("twill"), "train", s.args.config,
                        f"checkpoint.output_dir={out}",
                        f"data.path={s.args.data}", "parallel.dp=2",
                        f"parallel.collective_timeout_s={timeout}", *FAST],
                       timeout=120, env=dict(MPI_ENV, **{hook: "1"}))
        took = time.time() - started
        s.check(f"with {hook}, twill train ends, saying why (in {took:.0f} s)",
                result.returncode != 0 and re.search(said, result.stderr)
                and took < 60, result.stderr[-400:])
        left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True,
                              text=True).stdout.split()
        s.check("... and leaves no rank behind", not left, " ".join(left))
        again = launch(s, s.args.bin, out)
        s.check("... nor the folder held", again.returncode == 0,
                again.stderr[-300:])


def main():
    return run_cases((damaged_programs, stale_programs, one_run_per_folder,
                      earlier_checkpoints, output_errors, bounded_reads,
                      watched_launch))


if __name__ == "__main__":
    sys.exit(main())
