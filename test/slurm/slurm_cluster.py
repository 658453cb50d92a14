"""Slurm for real (issue 18): a one-node Slurm cluster on this machine runs
the tiny job on 2x2 through sbatch and srun, and its losses equal those of
the same job started with mpirun.

    python slurm_cluster.py --bin BUILD/bin --work DIR

Starts its own munged (a fresh key), slurmctld and slurmd, all on private
sockets, ports and folders under DIR (nothing of the machine's own Slurm or
munge is used), declaring 4 CPUs so that 4 ranks fit on a 2-core machine.
Then `twill train` (bin/twill) starts the job outside Slurm, with mpirun,
and scripts/slurm/one-node.sbatch starts it inside an allocation, where the
launcher uses srun. The daemons are shut down at the end, whatever happens.
Exit 77 (ctest's skip) only when the daemons cannot start, saying why.
"""
import argparse
import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = 77
JOB = [str(REPO / "configs/tiny.textproto"), "parallel.dp=2", "parallel.tp=2",
       "train.epochs=1", "train.max_steps_per_epoch=5"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd of a one-node cluster under `root`."""

    def __init__(self, root):
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.munge = root / "munge"

    def log_tails(self):
        text = []
        for log in ("munge/munged.log", "slurmctld.log", "slurmd.log"):
            path = self.root / log
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-5:]
                text.append(f"{log}: " + " / ".join(lines))
        return "\n".join(text)

    def start(self):
        """None when the cluster is up, else why it is not."""
        for tool in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo",
                     "scontrol"):
            if not shutil.which(tool):
                return f"{tool} is not installed (Debian: slurm-wlm, munge)"
        self.munge.mkdir(parents=True)
        key = self.munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        started = subprocess.run(
            ["munged", "--force", f"--key-file={key}",
             f"--socket={self.munge / 'munge.socket'}",
             f"--pid-file={self.munge / 'munged.pid'}",
             f"--log-file={self.munge / 'munged.log'}",
             f"--seed-file={self.munge / 'munged.seed'}"],
            capture_output=True, text=True)
        if started.returncode:
            return f"munged did not start: {started.stderr.strip()}"
        user, host = getpass.getuser(), socket.gethostname().split(".")[0]
        for folder in ("state", "spool"):
            (self.root / folder).mkdir()
        self.conf.write_text(f"""ClusterName=twilltest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={self.munge / 'munge.socket'}
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmUser={user}
SlurmdUser={user}
StateSaveLocation={self.root / 'state'}
SlurmdSpoolDir={self.root / 'spool'}
SlurmctldPidFile={self.root / 'slurmctld.pid'}
SlurmdPidFile={self.root / 'slurmd.pid'}
SlurmctldLogFile={self.root / 'slurmctld.log'}
SlurmdLogFile={self.root / 'slurmd.log'}
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=twill Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        for daemon in ("slurmctld", "slurmd"):
            started = subprocess.run([daemon, "-f", str(self.conf)],
                                     env=self.env, capture_output=True,
                                     text=True)
            if started.returncode:
                return (f"{daemon} did not start: {started.stderr.strip()}\n"
                        + self.log_tails())
        for _ in range(60):
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env,
                                   capture_output=True, text=True).stdout
            if state.strip() == "idle":
                return None
            time.sleep(0.5)
        return f"the node never became idle ({state.strip()!r})\n" + \
            self.log_tails()

    def stop(self):
        """Every daemon gone before this returns: asked, then told."""
        pids = []
        for pid_file in (self.root / "slurmd.pid", self.root / "slurmctld.pid",
                         self.munge / "munged.pid"):
            try:
                pids.append(int(pid_file.read_text()))
            except (OSError, ValueError):
                pass  # never started
        subprocess.run(["scontrol", "shutdown"], env=self.env,
                       capture_output=True)
        for signal in (15, 9):
            for pid in pids:
                try:
                    os.kill(pid, signal)
                except OSError:
                    pass  # already gone
            for _ in range(50):
                if not any(Path(f"/proc/{pid}").exists() for pid in pids):
                    return
                time.sleep(0.1)


def losses(folder):
    return [json.loads(line).get("loss")
            for line in (folder / "metrics.jsonl").read_text().splitlines()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work = args.work.resolve() / "slurm"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {**os.environ, "PATH": f"{args.bin.resolve()}:{os.environ['PATH']}",
           "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

    subprocess.run(["twill", "train", *JOB,
                    f"checkpoint.output_dir={work / 'mpirun'}"],
                   env=env, check=True, timeout=300)

    cluster = Cluster(work / "cluster")
    try:
        why = cluster.start()
        if why:
            print(f"SKIPPED: a one-node Slurm cluster cannot start here: {why}")
            return SKIP
        batch = subprocess.run(
            ["sbatch", "--wait", "--ntasks-per-node=4", "--cpus-per-task=1",
             "--gpus-per-node=0", f"--output={work / 'sbatch.out'}",
             str(REPO / "scripts/slurm/one-node.sbatch"), *JOB,
             f"checkpoint.output_dir={work / 'slurm'}", "--",
             "--backend=cpu"],
            env={**env, "SLURM_CONF": str(cluster.conf)}, capture_output=True,
            text=True,
            timeout=600)
        output = (work / "sbatch.out").read_text() \
            if (work / "sbatch.out").exists() else ""
        print(output)
        if batch.returncode:
            print(f"FAIL: sbatch exited {batch.returncode}: {batch.stderr}")
            return 1
    finally:
        cluster.stop()

    ok = "srun --mpi=pmix --ntasks=4" in output
    print(f"the launcher {'used' if ok else 'did NOT use'} srun in the "
          f"allocation")
    inside, outside = losses(work / "slurm"), losses(work / "mpirun")
    same = inside == outside and len(inside) == 5
    print(f"losses: sbatch/srun {inside}\n        mpirun      {outside}")
    ok = ok and same
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
