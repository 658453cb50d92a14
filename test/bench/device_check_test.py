"""bench/device_check.py's own guarantees, with stand-in programs (no GPU):

1. no GPU: every part says SKIPPED (none passed or failed) within seconds,
   and OUT holds at most 8 files, results.md among them, saying the check
   ended; at the default deadline its plan names each part's limit in the
   order they run, with room for a rerun;
2. a fault that ends the GPU's context: the conformance goes on from the
   next case in a new process, and the failed case is run again alone;
3. a part that hangs: at the deadline it is killed with everything it
   started (its grandchild too), what it printed before is kept, the parts
   after it are named as not run, and the whole check ends by its deadline;
   two NCCL ranks that hang end the nccl part at its run's limit, its
   second mesh named as not run;
4. SIGTERM to the check (the caller's own limit): the running part's
   process group is killed and results.md and the logs are still written;
5. a GPU that works, played by the real twill-train on the cpu (tiny
   programs under the 8B programs' names, with twillc's real reports) and
   an nvidia-smi that samples: every figure of every step is read from the
   tools' real output (tokens/s, MFU, predicted against measured step,
   memory, profile), the baselines run with their environment (the chunked
   kernel, the statistics recomputed) and give their ratios, the estimate
   is calibrated from the profile into a cluster file, the conformance runs
   on the image's NCCL under TWILL_CUDA_ATTENTION=fused and the nccl part on
   the bundle's, each named, and the traces come back; on an H100 the
   check takes the H100's cluster and its seq-16384 program;
6. flags it cannot use are refused before anything runs, one line naming
   the flag or the path, exit 2, never a traceback: a --deadline that is not
   a finite number of seconds past the time kept to pack (nan, inf, 0, -5,
   a word), an --out that is a file, under one, unwritable, holding a file
   of the check's name (left as it was) or holding --work, a --work that is
   a file, a --bin without the programs the parts run, a --programs that is
   no folder, an unknown or no part (the valid ones named);
7. a --work or --programs holding the user's files, run in twice: they are
   kept as they were, and none is packed.

    python device_check_test.py --work DIR --bin BUILD/bin --config TINY
        --data TRAIN_JSONL --clusters CLUSTERS_DIR
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECK = HERE.parent.parent / "bench" / "device_check.py"

# Stand-ins for twill-conformance, twill-train and cuda_vs_cpu.py, acting
# as FAKE_MODE says: nogpu, fault or hang. A hanging one starts a
# grandchild (whose pid it writes to $FAKE_PIDS) and waits forever.
HANG = """
sleep 1000 &
echo $! >> "$FAKE_PIDS"
echo "[0] add f32 [3]: max error 0.0e+00, tolerance 1.0e-06 PASS"
while true; do sleep 1; done
"""
# The NCCL a stand-in would load: the bundle's where its folder is first on
# the library path, else the image's.
NCCL = """
case "$LD_LIBRARY_PATH" in
"$TWILL_BUNDLED_NCCL"|"$TWILL_BUNDLED_NCCL":*) echo "gpu:1:1 [0] NCCL INFO NCCL version 2.30.7+cuda13.0";;
*) echo "gpu:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0";;
esac
"""
PLANNED = ("echo 'twill: cuDNN 9.19.0 planned attention of 1 x 64 tokens, 4 "
           "heads on 2, head_dim 16: forward in 0.41 s, gradient in 1.20 s' >&2")
CONFORMANCE = f"""#!/bin/bash
case "$FAKE_MODE" in
gpu)
  [ "$TWILL_CUDA_ATTENTION" = fused ] || exit 3
  if [[ " $* " == *" --filter=attention_grad "* ]]; then
    [ "$TWILL_ATTENTION_STATISTICS" = recompute ] || exit 3
    echo "[3] attention_grad f32 [2,17,3,10]: max error 1.0e-07, tolerance 1.0e-05 PASS"
    echo "conformance: 1 of 1 cases passed, 0 failed, 0 instruction kinds without a case; cuda against cpu in 0.1 s"
    exit 0
  fi
  [ -z "$TWILL_ATTENTION_STATISTICS" ] || exit 3
  {NCCL}
  {PLANNED}
  echo "[0] add f32 [3]: max error 0.0e+00, tolerance 1.0e-06 PASS"
  echo "[1] attention bf16 [2,200,8,64] (GQA, head_dim 64, seq 200 (fused on cuda)): max error 1.0e-03, tolerance 3.0e-02 PASS"
  echo "conformance: 2 of 2 cases passed, 0 failed, 0 instruction kinds without a case; cuda against cpu in 0.1 s";;
nogpu)
  echo "twill-conformance: --backend=cuda needs a GPU, and this machine has none" >&2
  exit 77;;
hang) {HANG};;
fault)
  if [[ " $* " == *" --case=1 "* ]]; then
    echo "[1] matmul bf16 [5,7]: error: an illegal memory access FAIL"
    exit 1
  elif [[ " $* " == *" --first=2 "* ]]; then
    echo "[2] add f32 [3]: max error 0.0e+00, tolerance 1.0e-06 PASS"
    echo "conformance: 1 of 1 cases passed, 0 failed, 0 instruction kinds without a case; cuda against cpu in 0.1 s"
    exit 0
  fi
  echo "[0] add f32 [3]: max error 0.0e+00, tolerance 1.0e-06 PASS"
  echo "[1] matmul bf16 [5,7]: error: an illegal memory access FAIL"
  echo "conformance: the cuda backend can run nothing more after case 1 (the GPU failed: an illegal memory access); the cases after it need a new process: --first=2"
  echo "conformance: 1 of 2 cases passed, 1 failed, 0 instruction kinds without a case; cuda against cpu in 0.1 s (stopped after case 1)"
  exit 1;;
esac
"""
# A working GPU: the real twill-train on the cpu, fed the tiny job's data,
# saying what the cuda backend says of its memory. The chunked attention's
# program runs with TWILL_CUDA_ATTENTION=chunked and the recomputed
# statistics' with TWILL_ATTENTION_STATISTICS=recompute, and only they; at
# seq 16384 it says cuDNN took no gradient of one shape.
GPU_TRAIN = f"""
[[ "$*" == *chunked* ]] && [ "$TWILL_CUDA_ATTENTION" != chunked ] && exit 3
[[ "$*" != *chunked* ]] && [ -n "$TWILL_CUDA_ATTENTION" ] && exit 3
[[ "$*" == *recompute* ]] && [ "$TWILL_ATTENTION_STATISTICS" != recompute ] && exit 3
[[ "$*" != *recompute* ]] && [ -n "$TWILL_ATTENTION_STATISTICS" ] && exit 3
[[ "$*" == *llama8b* && "$*" != *chunked* ]] && {PLANNED}
[[ "$*" == *-16384* ]] && echo "twill: attention's gradient of 1 x 16384 tokens, 32 heads on 8, head_dim 128 runs the chunked kernel: no engine" >&2
args=()
while (($#)); do
  case "$1" in
  --backend=cuda) args+=(--backend=cpu);;
  --data) args+=(--data "$FAKE_DATA"); shift;;
  *) args+=("$1");;
  esac
  shift
done
"$FAKE_TWILL_BIN/twill-train" "${{args[@]}}" || exit $?
[[ "${{args[*]}}" == *nccl-*-cuda* ]] && {{ {NCCL} }}
echo "cuda: device memory in use at most 1.50 GiB (cudaMemGetInfo after each run, every process on the GPU); Twill's own allocations at most 1.20 GiB: 1.00 GiB of buffers as planned, the rest scratch and the matmul workspace"
exit 0
"""
NVIDIA_SMI = """#!/bin/bash
if [[ " $* " == *" -lms "* ]]; then
  while true; do echo 1234; sleep 0.1; done
fi
echo "${FAKE_GPU:-NVIDIA H200, 143771 MiB, 580.159.03}"
"""
TRAIN = f"""#!/bin/bash
[ "$FAKE_MODE" = hang ] && {{ {HANG} }}
[ "$FAKE_MODE" = gpu ] && {{ {GPU_TRAIN} }}
echo "memory: 1.0 MiB of computed values share a 1.0 MiB arena; the program needs 2.0 MiB (2097152 B)"
echo "twill-train: --backend=cuda needs a GPU, and this machine has none" >&2
exit 1
"""
CUDA_VS_CPU = """
import os, sys
if os.environ["FAKE_MODE"] == "gpu":
    print("LoRA: loss 6.300000 vs 6.300001, 12 gradients within 1.0e-06")
    sys.exit(0)
print("SKIPPED: twill-train: --backend=cuda needs a GPU, and this machine has none")
sys.exit(77)
"""


def stand_ins(work):
    bin_dir, tests = work / "bin", work / "tests"
    for folder in (bin_dir, tests, work / "programs"):
        folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("twill-conformance", CONFORMANCE),
                       ("twill-train", TRAIN)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tests / "cuda_vs_cpu.py").write_text(CUDA_VS_CPU)
    (work / "gpu-bin").mkdir(exist_ok=True)
    (work / "gpu-bin" / "nvidia-smi").write_text(NVIDIA_SMI)
    (work / "gpu-bin" / "nvidia-smi").chmod(0o755)
    return bin_dir, tests


def start(work, mode, deadline, out, *flags):
    """The check with the stand-ins; `flags` come last, so that one of them
    overrides the same flag before it."""
    bin_dir, tests = stand_ins(work)
    pids = work / f"pids-{out.name}"
    pids.write_text("")
    gpu = f"{work / 'gpu-bin'}:" if mode == "gpu" else ""
    # run.sh names the bundle's NCCL; the nccl part alone loads it.
    env = dict(os.environ, FAKE_MODE=mode, FAKE_PIDS=str(pids),
               PATH=f"{gpu}{bin_dir}:/usr/bin:/bin",
               TWILL_BUNDLED_NCCL=str(work / "bundle-nccl"))
    command = [sys.executable, str(CHECK), "--bin", str(bin_dir),
               "--programs", str(work / "programs"), "--tests", str(tests),
               "--data", str(work / "data.jsonl"), "--out", str(out),
               "--work", str(work / f"parts-{out.name}"),
               "--deadline", str(deadline), *map(str, flags)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True), pids


def finish(process, limit):
    try:
        output, _ = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        process.kill()
        sys.exit(f"the check did not end within {limit} s")
    return output


def alive(pids):
    """The processes of `pids` still running after a second's grace (a
    killed one is a zombie until init reaps it: that counts as ended)."""
    def running(pid):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
        except OSError:
            return False
        return state.split()[0] not in "ZX"
    for _ in range(20):
        living = [pid for pid in pids.read_text().split() if running(pid)]
        if not living:
            break
        time.sleep(0.1)
    return living


def expect(condition, what, context=""):
    if not condition:
        sys.exit(f"FAILED: {what}\n{context}")
    print(f"ok: {what}")


def came_back(out):
    """What a device call would bring back: every file under OUT."""
    files = [path for path in out.rglob("*") if path.is_file()]
    expect(len(files) <= 8, f"{out.name}: at most 8 files ({len(files)})",
           "\n".join(map(str, files)))
    expect((out / "results.md").exists(), f"{out.name}: results.md written")
    return (out / "results.md").read_text()


def rows(results):
    return [line for line in results.splitlines()
            if line.startswith("| ") and not line.startswith("| what")]


def no_gpu(work):
    out = work / "nogpu"
    began = time.monotonic()
    process, _ = start(work, "nogpu", 540, out)
    output = finish(process, 90)
    seconds = time.monotonic() - began
    results = came_back(out)
    expect(seconds < 60, f"no GPU: every part ends within seconds ({seconds:.0f} s)")
    plan = next((line for line in results.splitlines()
                 if line.startswith("Card ")), "")
    expect(re.search(r"Plan: GPU query \d+ s, conformance \d+ s \(from the "
                     r"first case \d+, attention_grad recomputing the "
                     r"statistics \d+, failed cases alone \d+\), cuda_vs_cpu "
                     r"\d+ s, peak \d+ s, steps \d+ s \(seq 4096 \d+, seq 4096, "
                     r"chunked attention \d+, seq 4096, attention's statistics "
                     r"recomputed \d+, seq 16384 \d+\), nccl \d+ s; 8 s kept to "
                     r"pack: \d+ s of the 540 s deadline, \d+ s to spare, room "
                     r"for one rerun", plan),
           "no GPU: the plan names each part's limit in order, with room "
           "for a rerun", plan)
    gpu_rows = [row for row in rows(results) if "wall time" not in row]
    expect(len(gpu_rows) >= 8, "no GPU: a row per part", results)
    expect(all("SKIPPED" in row for row in gpu_rows),
           "no GPU: every part says SKIPPED", results)
    expect(not any(word in results for word in ("passed", "FAILED", "PASS")),
           "no GPU: nothing says passed or failed", results)
    expect("the check ended" in results, "no GPU: results.md says it ended")
    with tarfile.open(out / "logs.tar.gz") as archive:
        names = archive.getnames()
    expect("conformance-0.txt" in names and "cuda_vs_cpu.txt" in names,
           "no GPU: each part's output in logs.tar.gz", str(names))


def fault(work):
    out = work / "fault"
    process, _ = start(work, "fault", 120, out)
    finish(process, 90)
    results = came_back(out)
    row = next(row for row in rows(results) if row.startswith("| conformance ("))
    expect("lost 1 time(s)" in row and "--first=2" in row,
           "fault: the conformance goes on from the next case", row)
    expect("1 of 2 cases passed" in row and "1 of 1 cases passed" in row,
           "fault: both processes' totals are reported", row)
    expect("[1] fails alone" in results,
           "fault: the failed case is run again alone", results)
    expect("cut off" not in row, "fault: the conformance ran to its end", row)


def hang(work):
    out = work / "hang"
    deadline = 14
    began = time.monotonic()
    process, pids = start(work, "hang", deadline, out)
    finish(process, deadline + 30)
    seconds = time.monotonic() - began
    results = came_back(out)
    expect(seconds < deadline + 5,
           f"hang: the check ends by its deadline ({seconds:.1f} s of {deadline})")
    expect(not alive(pids) and pids.read_text().split(),
           "hang: the hanging part's grandchild is killed with it",
           pids.read_text())
    log = (out / "device_check.log").read_text()
    expect("[0] add f32 [3]" in log,
           "hang: what the part printed before its end is kept", log)
    expect("stopped after its limit" in log, "hang: the cut is said", log)
    expect(any("NOT RUN: the deadline had come" in row for row in rows(results)),
           "hang: the parts after it are named as not run", results)


def nccl_hang(work):
    """Two ranks that hang end the nccl part at its run's limit: the other
    mesh would hang as well, and is named as not run."""
    out = work / "nccl-hang"
    began = time.monotonic()
    process, pids = start(work, "hang", 120, out, "--parts", "nccl")
    finish(process, 90)
    seconds = time.monotonic() - began
    results = came_back(out)
    expect(re.search(r"\| NCCL: the tiny job on 2x1, .* \| FAILED on cuda "
                     r"\(exit None\)", results) and
           "| NCCL: the tiny job on 1x2, two ranks on one GPU, against the "
           "cpu | NOT RUN: 2x1 did not end |" in results and seconds < 45,
           f"nccl: a hang ends the part at its run's limit ({seconds:.0f} s)",
           results)
    expect(not alive(pids), "nccl: the hanging ranks are killed",
           pids.read_text())


def terminated(work):
    out = work / "term"
    process, pids = start(work, "hang", 200, out)
    log = out / "device_check.log"
    for _ in range(200):  # until the hanging part has started its grandchild
        if pids.read_text().strip():
            break
        time.sleep(0.1)
    time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    finish(process, 20)
    results = came_back(out)
    expect("stopped by signal 15" in results,
           "SIGTERM: results.md says the check was stopped", results)
    expect(not alive(pids), "SIGTERM: the running part's group is killed",
           pids.read_text())
    expect((out / "logs.tar.gz").exists() and "[0] add f32" in log.read_text(),
           "SIGTERM: the logs are kept")


PARTS = ["conformance", "cuda_vs_cpu", "peak", "steps", "nccl", "dropout",
         "long", "sanitizer"]


def refused(work, what, flags, *named, out=None):
    """The check given `flags` ends at once with argparse's one-line error
    naming each of `named`, having run nothing."""
    process, _ = start(work, "nogpu", 120, out or work / "refused", *flags)
    output = finish(process, 60)
    last = (output.strip().splitlines() or [""])[-1]
    expect(process.returncode == 2 and "Traceback" not in output and
           "===" not in output and
           last.startswith("device_check.py: error: ") and
           all(str(name) in last for name in named),
           f"refused: {what}", output[-2000:])


def bad_deadline(work):
    for value in ("nan", "inf", "-inf", "1e999", "-5", "0", "9", "soon", ""):
        refused(work, f"--deadline={value}", [f"--deadline={value}"],
                "--deadline", repr(value))


def bad_out(work):
    notes = work / "notes.txt"
    notes.write_text("mine\n")
    refused(work, "--out a file", [], notes, out=notes)
    expect(notes.read_text() == "mine\n", "--out a file: left as it was")
    refused(work, "--out under a file", [], notes / "out", out=notes / "out")
    # sysfs: no one, root included, makes a file or a folder in it.
    if os.path.isdir("/sys/kernel"):
        for path in (Path("/sys/kernel"), Path("/sys/twill-device-check")):
            refused(work, f"--out unwritable ({path})", [], path, out=path)
    user = work / "user-out"
    user.mkdir()
    (user / "results.md").write_text("my results\n")
    refused(work, "--out holding a results.md", [], user, "results.md",
            out=user)
    expect(os.listdir(user) == ["results.md"] and
           (user / "results.md").read_text() == "my results\n",
           "--out holding a results.md: left as it was")
    refused(work, "--work inside --out",
            ["--work", work / "inside" / "parts"], "--work", "--out",
            out=work / "inside")


def users_folders(work):
    """--work and --programs naming folders of the user's, holding files
    of the names the check writes, run in twice."""
    mine, programs = work / "mine", work / "my-programs"
    (mine / "sub").mkdir(parents=True)
    programs.mkdir()
    files = {mine / "notes.txt": "mine\n", mine / "sub" / "keep.txt": "keep\n",
             mine / "conformance-0.txt": "my conformance\n",
             programs / "data-4096.jsonl": "my data\n",
             programs / "llama8b-4096.memory": "my samples\n"}
    for path, text in files.items():
        path.write_text(text)
    for run in (1, 2):
        out = work / f"mine-{run}"
        process, _ = start(work, "nogpu", 120, out, "--work", mine,
                           "--programs", programs)
        output = finish(process, 90)
        expect(process.returncode == 0, f"user's folders, run {run}: ran",
               output[-2000:])
        kept = all(path.is_file() and path.read_text() == text
                   for path, text in files.items())
        expect(kept and sorted(os.listdir(programs)) ==
               ["data-4096.jsonl", "llama8b-4096.memory"],
               f"user's folders, run {run}: their files kept as they were")
        with tarfile.open(out / "logs.tar.gz") as archive:
            names = archive.getnames()
            text = archive.extractfile("conformance-0.txt").read().decode()
        expect("needs a GPU" in text and "notes.txt" not in names,
               f"user's folders, run {run}: only the check's output packed",
               text)
    notes = mine / "notes.txt"
    refused(work, "--work a file", ["--work", notes], notes)
    expect(notes.read_text() == "mine\n", "--work a file: left as it was")


def bad_bin_programs_parts(work):
    refused(work, "--bin no folder", ["--bin", work / "no-bin"], "no-bin")
    only = work / "conformance-only"
    only.mkdir()
    (only / "twill-conformance").write_text(CONFORMANCE)
    (only / "twill-conformance").chmod(0o755)
    refused(work, "--bin without twill-train, for the steps",
            ["--bin", only, "--parts", "conformance,steps"], only,
            "twill-train")
    process, _ = start(work, "nogpu", 120, work / "only", "--bin", only,
                       "--parts", "conformance")
    output = finish(process, 60)
    expect(process.returncode == 0,
           "--bin without twill-train, for the conformance alone: ran", output)
    refused(work, "--programs no folder",
            ["--programs", work / "no-programs"], "no-programs")
    refused(work, "--parts an unknown one", ["--parts", "steps,nosuch"],
            "nosuch", *PARTS)
    refused(work, "--parts none", ["--parts=,"], *PARTS)


# The programs the check runs, each the tiny job under an 8B program's name
# writing where the check reads, with twillc's report at each card's
# cluster.
PROGRAMS = {"nccl-2x1-cuda": ["parallel.dp=2"], "nccl-2x1-cpu": ["parallel.dp=2"],
            "nccl-1x2-cuda": ["parallel.tp=2"], "nccl-1x2-cpu": ["parallel.tp=2"],
            "llama8b-4096": [], "llama8b-chunked-4096": [],
            "llama8b-recompute-4096": [],
            "llama8b-dropout-4096": ["lora.dropout=0.1"],
            "llama8b-16384": [], "llama8b-16384-h100": [],
            "llama8b-long-32768": ["parallel.activation_checkpointing=FULL"]}
STEPS = ("seq 4096", "seq 4096, chunked attention",
         "seq 4096, attention's statistics recomputed", "seq 16384",
         "seq 4096, LoRA dropout 0.1", "seq 32768, FULL + offload + tiles")


def compile_programs(work, args):
    programs = work / "programs"
    for name, overrides in PROGRAMS.items():
        job = [args.bin / "twillc", args.config, "train.epochs=1",
               "train.max_steps_per_epoch=4", "checkpoint.save_every=0",
               f"checkpoint.output_dir={programs / (name + '-out')}",
               "checkpoint.overwrite_output_dir=true", *overrides]
        subprocess.run(job + ["-o", programs / f"{name}.twx"], check=True)
        for card in ("h200", "h100"):
            with open(programs / f"{name}.report-{card}.txt", "w") as report:
                subprocess.run(job + ["--report", "--cluster",
                                      args.clusters / f"{card}.textproto"],
                               stdout=report, check=True)
    os.environ.update(FAKE_TWILL_BIN=str(args.bin), FAKE_DATA=str(args.data))


def step_rows(results, what):
    """The rows of one step, and whether each figure is there."""
    step = [row for row in rows(results)
            if row.startswith(f"| 8B LoRA step, {what}: ")]
    figures = "\n".join(step)
    chunked = "chunked" in what
    expect(len(step) == 5 + (not chunked) and
           re.search(r"tokens/s .*\| [\d,]+ ", figures),
           f"GPU: {what}: tokens/s", figures)
    said = ("attention | attention's gradient of 1 x 16384 tokens, "
            "32 heads on 8, head_dim 128 runs the chunked kernel: no engine"
            if what == "seq 16384" else
            "attention | cuDNN's fused attention for every shape; cuDNN "
            "planned 1 attention shapes, each graph in at most 1.20 s")
    expect(chunked or said in figures, f"GPU: {what}: which attention ran",
           figures)
    expect(re.search(r"MFU \| \S+% of 989 TFLOP/s", figures),
           f"GPU: {what}: MFU", figures)
    expect(re.search(r"predicted [\d.]+ ms, measured [\d.]+ ms: [\d.e+-]+ of "
                     r"it", figures),
           f"GPU: {what}: predicted against measured", figures)
    expect(re.search(r"memory \| plan [\d.]+ GiB; Twill allocated at most "
                     r"1.20 GiB \(1.00 GiB buffers\); cudaMemGetInfo peak "
                     r"1.50 GiB; nvidia-smi peak 1.21 GiB", figures),
           f"GPU: {what}: memory, sampled", figures)
    # Six op kinds with their share and rate (which come first depends on
    # the machine's load).
    expect(re.search(r"profile \(top op kinds\) \| (\w+ [\d.]+% [\d.]+ "
                     r"\w+/s(; | \|)){6}", figures),
           f"GPU: {what}: profile", figures)
    return figures


def working_gpu(work, args):
    compile_programs(work, args)
    out = work / "gpu"
    process, _ = start(work, "gpu", 150, out, "--parts", ",".join(PARTS))
    output = finish(process, 140)
    results = came_back(out)
    for what in STEPS:
        step_rows(results, what)
    for mesh in ("2x1", "1x2"):
        expect(re.search(rf"NCCL: the tiny job on {mesh}, two ranks on one "
                         r"GPU, against the cpu \| passed: 4 losses within"
                         r".*; NCCL 2\.30\.7\+cuda13\.0 \|",
                         results), f"GPU: NCCL, {mesh}, on the bundle's NCCL",
               results)
    expect("| libraries the parts loaded | NCCL 2.28.9+cuda13.0 (the "
           "conformance); NCCL 2.30.7+cuda13.0 (the nccl part); cuDNN 9.19.0 "
           "(the 8B steps, the conformance) |" in results,
           "GPU: the conformance on the image's NCCL, the nccl part on the "
           "bundle's, and cuDNN's version, named", results)
    expect("| GPU (nvidia-smi) | NVIDIA H200, 143771 MiB" in results and
           "Card h200 (clusters/h200.textproto)" in results and
           "| gpu.cuda_vs_cpu | passed" in results and
           "2 of 2 cases passed" in results and
           "| conformance: cuDNN's plans | 1 of 1 cases meant for cuDNN's "
           "fused attention passed on it; cuDNN planned 1 attention shapes"
           in results and "| conformance: attention_grad, its statistics "
           "recomputed (TWILL_ATTENTION_STATISTICS=recompute) | conformance: "
           "1 of 1 cases passed" in results,
           "GPU: the card, and the other parts' verdicts", results)
    for what in ("cuDNN's fused attention against the chunked kernel",
                 "attention's statistics kept against recomputed"):
        expect(re.search(rf"{what}: the 8B LoRA step's tokens/s at seq 4096 "
                         r"\| [\d.]+x", results), f"GPU: {what}", results)
    calibrated = re.search(
        r"\| twillc's estimate calibrated by the seq-4096 step's profile, "
        r"against each step measured \| rates: attention [\d.]+ TFLOP/s, "
        r"bytes [\d.]+ GB/s, matmul [\d.]+ TFLOP/s \(calibrated-cluster"
        r"\.textproto\); llama8b-4096 predicted [\d.]+ ms, measured [\d.]+ "
        r"ms \([+-]\d+%\); llama8b-16384 predicted [^;]*\|", results)
    cluster = (out / "calibrated-cluster.textproto").read_text() \
        if (out / "calibrated-cluster.textproto").exists() else ""
    expect(calibrated and re.search(r"^attention_tflops: [\d.]+$", cluster,
                                    re.MULTILINE) and "name: \"1 x H200\""
           in cluster, "GPU: the estimate calibrated by the profile, and its "
           "cluster file", results + cluster)
    with tarfile.open(out / "traces.tar.gz") as archive:
        names = archive.getnames()
    expect(sorted(names) == ["llama8b-4096.trace.json.gz",
                             "llama8b-chunked-4096.trace.json.gz",
                             "llama8b-dropout-4096.trace.json.gz",
                             "llama8b-recompute-4096.trace.json.gz"],
           "GPU: the seq-4096 traces come back", str(names))


def h100(work):
    """An H100: its cluster, and the seq-16384 program that fits it."""
    out = work / "h100"
    os.environ["FAKE_GPU"] = "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04"
    try:
        process, _ = start(work, "gpu", 150, out, "--parts", "steps")
        finish(process, 140)
    finally:
        del os.environ["FAKE_GPU"]
    results = came_back(out)
    step_rows(results, "seq 16384")
    with tarfile.open(out / "logs.tar.gz") as archive:
        names = archive.getnames()
    expect("Card h100 (clusters/h100.textproto)" in results and
           "step time, twillc's prediction at clusters/h100.textproto" in
           results and "llama8b-16384-h100.txt" in names and
           "llama8b-16384.txt" not in names,
           "H100: its cluster and its seq-16384 program", results + str(names))
    expect("name: \"1 x H100\"" in
           (out / "calibrated-cluster.textproto").read_text(),
           "H100: its cluster calibrated")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--bin", type=Path, required=True,
                        help="twillc and twill-train, for a working GPU")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--clusters", type=Path, required=True)
    args = parser.parse_args()
    import shutil
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    (args.work / "data.jsonl").write_text('{"input_ids": [1, 2, 3]}\n')
    for case in (bad_deadline, bad_out, users_folders, bad_bin_programs_parts,
                 no_gpu, fault, hang, nccl_hang, terminated):
        case(args.work)
    working_gpu(args.work, args)
    h100(args.work)


if __name__ == "__main__":
    main()
