"""Training launched without MPI: torchrun's variables, the TCP transport.

    python socket_launch.py --bin BUILD/bin --work DIR --data train.jsonl
                            --config tiny.textproto

The tiny job's losses on 2x2 under torchrun (its agent's store on
MASTER_PORT, Twill's hub on the first free port after it) and on 1x2 with
the variables set by hand (the hub on MASTER_PORT, as a Kubernetes
PyTorchJob sets them)
must be its 1x1 losses within 1e-5 relative, and so must two jobs run at
once whose hubs may take the same ports, as under mpirun
(mesh_equivalence.py). And a launch that goes wrong ends, with the reason
on every rank, instead of waiting: a rank that fails at its start ends the
others; a launch with fewer ranks than the mesh is refused on each.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

JOB = ["model.num_hidden_layers=2", "model.vocab_size=509", "lora.rank=3",
       "lora.alpha=6", "train.seq_len=30", "train.batch_size=3",
       "train.gradient_accumulation_steps=2", "train.epochs=1",
       "train.max_steps_per_epoch=5"]
TOLERANCE = 1e-5


def compile_job(args, dp, tp, name):
    program = args.work / f"{name}.twx"
    subprocess.run([str(args.bin / "twillc"), str(args.config), *JOB,
                    f"parallel.dp={dp}", f"parallel.tp={tp}",
                    f"checkpoint.output_dir={args.work / name}", "-o",
                    str(program)], check=True)
    return program


def losses(args, name):
    metrics = args.work / name / "metrics.jsonl"
    return [json.loads(line)["loss"]
            for line in metrics.read_text().splitlines()]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(command_of_rank, ranks, port, **variables):
    """Starts `ranks` processes with torchrun's variables set by hand, the
    hub on MASTER_PORT=`port` unless `variables` say otherwise."""
    processes = []
    for rank in range(ranks):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1")
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        env.update(variables)
        processes.append(subprocess.Popen(
            command_of_rank(rank), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return processes


def finish(processes, timeout=120):
    """Each process's (exit code, output), once it has ended."""
    results = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            output += f"\n(killed after {timeout} s: it waited)"
        results.append((process.returncode, output))
    return results


def by_hand(command_of_rank, ranks, timeout=120):
    """`ranks` processes with the variables set by hand, run to their end."""
    return finish(start(command_of_rank, ranks, free_port()), timeout)


def free_ports(count):
    """The first of `count` consecutive ports free on this machine."""
    while True:
        first = free_port()
        try:
            for port in range(first, first + count):
                with socket.socket() as probe:
                    probe.bind(("", port))
            return first
        except OSError:
            continue


def listener(port, answer):
    """Holds `port` as something that is no hub of this job would: it never
    accepts (`answer` None), or answers each connection `answer`."""
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("", port))
    held.listen(16)
    if answer is not None:
        def serve():
            while True:
                try:
                    connection, _ = held.accept()
                except OSError:
                    return
                with connection:
                    connection.sendall(answer)
        threading.Thread(target=serve, daemon=True).start()
    return held


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args()
    # A run of its own: the folder of an earlier run's results is refused.
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    train = [str(args.bin / "twill-train")]
    failures = []

    alone = compile_job(args, 1, 1, "alone")
    subprocess.run(train + [str(alone), "--data", str(args.data)],
                   check=True, capture_output=True)
    reference = losses(args, "alone")

    def compare(name, what):
        got = losses(args, name)
        worst = max(abs(a - b) / abs(b) for a, b in zip(got, reference))
        if len(got) != len(reference) or worst > TOLERANCE:
            failures.append(f"{what}: losses {got} vs 1x1 {reference}")
        print(f"{what}: {len(got)} losses within {worst:.1e} of 1x1's")

    program = compile_job(args, 2, 2, "torchrun-2x2")
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=4", "--no-python", *train, str(program), "--data",
         str(args.data)], env=dict(os.environ, OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        sys.exit(f"2x2 under torchrun failed:\n{run.stdout}{run.stderr}")
    compare("torchrun-2x2", "2x2 under torchrun")

    program = compile_job(args, 1, 2, "by-hand-1x2")
    ran = by_hand(lambda rank: train + [str(program), "--data",
                                        str(args.data)], 2)
    if any(code != 0 for code, _ in ran):
        sys.exit("1x2 launched by hand failed:\n" +
                 "\n".join(output for _, output in ran))
    compare("by-hand-1x2", "1x2, the variables set by hand")

    # Two jobs at once on one machine under torchrun's variables: their
    # agents' stores hold MASTER_PORT P and P+1 (here listeners that never
    # answer), so their hubs' ports overlap; P+2 answers what is no message.
    # Each job's rank 0 takes the first port free, each rank finds its own
    # job's hub by its greeting, and each job trains as on 1x1.
    first = free_ports(12)
    held = [listener(first, None), listener(first + 1, None),
            listener(first + 2, b"HTTP/1.1 400 Bad Request\r\n\r\n")]
    jobs = {}
    for name, port in (("together-a", first), ("together-b", first + 1)):
        program = compile_job(args, 1, 2, name)
        jobs[name] = start(
            lambda rank, program=program: train + [str(program), "--data",
                                                   str(args.data)],
            2, port, TORCHELASTIC_USE_AGENT_STORE="True")
    for name, processes in jobs.items():
        ran = finish(processes)
        if any(code != 0 for code, _ in ran):
            sys.exit(f"{name}, one of two jobs at once, failed:\n" +
                     "\n".join(output for _, output in ran))
        compare(name, f"{name}, one of two jobs whose hub ports overlap")
    for socket_held in held:
        socket_held.close()

    # Rank 1 cannot read its data: it fails, and rank 0, waiting for it in
    # a collective, ends too, saying why.
    program = compile_job(args, 1, 2, "one-fails")
    ran = by_hand(lambda rank: train + [
        str(program), "--data",
        str(args.data if rank == 0 else args.work / "no-such.jsonl")], 2, 60)
    codes = [code for code, _ in ran]
    if codes[0] == 0 or codes[1] == 0 or "rank 1 ended the job" not in ran[0][1]:
        failures.append(f"a rank failing at its start: exits {codes}, rank "
                        f"0 said:\n{ran[0][1][-800:]}")
    else:
        print("a rank failing at its start ends the other, which says so")

    # Two ranks for a 2x2 mesh: refused on each.
    program = compile_job(args, 2, 2, "too-few")
    ran = by_hand(lambda rank: train + [str(program), "--data",
                                        str(args.data)], 2, 60)
    said = [("(4 ranks) but 2 ranks were started" in output)
            for _, output in ran]
    if any(code == 0 for code, _ in ran) or not all(said):
        failures.append("2 ranks for a 2x2 mesh: " + " / ".join(
            f"exit {code}: {output[-300:]}" for code, output in ran))
    else:
        print("2 ranks for a 2x2 mesh: refused on each")

    if failures:
        sys.exit("FAILED:\n" + "\n".join(failures))
    print("socket launch: ok")


if __name__ == "__main__":
    main()
