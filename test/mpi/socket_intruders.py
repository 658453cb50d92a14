"""The TCP launch lets in only its own job's ranks.

    python socket_intruders.py --bin BUILD/bin --work DIR --data train.jsonl
                               --config tiny.textproto

A 1x2 job's rank 0 is started alone; before its rank 1, connections that are
not the job's reach its hub: a hello with no proof of the job's secret, one
proved with a wrong secret, bytes that are no message, a proved hello of a
rank outside the job, and one that says nothing. Each is refused (the silent
one when its handshake's time is up) and named by address in rank 0's
output, and the job, its real rank 1 started last, trains to its 1x1
losses. The hub listens on MASTER_ADDR's address only. A second process
with the same RANK is refused by the hub, by name, and the job trains on.
"""

import argparse
import hashlib
import hmac
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from socket_launch import TOLERANCE, compile_job, finish, free_port, losses
from socket_launch import start

SECRET = "the job's own secret, not guessed"
MAGIC, HELLO, ABORT, GREETING, ANSWER = 0x7431C0DE, 1, 5, 6, 7


def frame(kind, rank, sequence, body):
    return struct.pack("<IIiiQQ", MAGIC, kind, rank, 0, sequence,
                       len(body)) + bytes(96) + body


def read_message(connection):
    """(kind, body) of the next message, or None once the hub has closed."""
    head = b""
    while len(head) < 128:
        chunk = connection.recv(128 - len(head))
        if not chunk:
            return None
        head += chunk
    magic, kind, _, group, _, size = struct.unpack("<IIiiQQ", head[:32])
    assert magic == MAGIC and group == 0, head
    body = b""
    while len(body) < size:
        chunk = connection.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return kind, body


def proof(secret, text):
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


class Intruder:
    """A connection to the hub, greeted."""

    def __init__(self, port):
        self.connection = socket.create_connection(("127.0.0.1", port), 5)
        self.connection.settimeout(20)
        self.name = "127.0.0.1:%d" % self.connection.getsockname()[1]
        kind, body = read_message(self.connection)
        assert kind == GREETING, kind
        token, _, nonce = body.decode().rpartition("\n")
        self.token, self.nonce = (token, nonce) if token else (nonce, "")

    def hello(self, rank, ranks, secret=None):
        mine = "i" * 32
        shown = (proof(secret, f"rank|{self.nonce}|{mine}|{rank}|{ranks}")
                 if secret else "0" * 64)
        self.connection.sendall(frame(HELLO, rank, ranks,
                                      f"{mine}\n{shown}\nintruder".encode()))
        return mine

    def refused(self):
        """The hub's last word before it closed the connection, if it did."""
        said = ""
        while True:
            try:
                message = read_message(self.connection)
            except socket.timeout:
                return "(it is still connected after 20 s)"
            if message is None:
                return said
            said = message[1].decode(errors="replace")


def wait_for_hub(port, seconds=60):
    until = time.time() + seconds
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"no hub listened on port {port} in {seconds} s")


def this_machines_other_address():
    """A non-loopback address of this machine, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.77", 9))  # no packet is sent
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def intruders_first(args, train, reference, failures):
    program = compile_job(args, 1, 2, "intruders")
    port = free_port()
    command = train + [str(program), "--data", str(args.data)]
    rank0 = start(lambda rank: command, 1, port, WORLD_SIZE="2",
                  TWILL_JOB_SECRET=SECRET)
    wait_for_hub(port)
    checks = []

    def check(what, ok, detail=""):
        checks.append((what, ok))
        print(f"{what}: {'refused' if ok else 'NOT refused'} {detail}")

    no_secret = Intruder(port)
    no_secret.hello(1, 2)
    said = no_secret.refused()
    check("a hello without the secret",
          "did not prove it knows the job's secret" in said, said)
    wrong = Intruder(port)
    wrong.hello(1, 2, "a wrong secret of some length")
    said = wrong.refused()
    check("a hello proved with a wrong secret",
          "did not prove it knows the job's secret" in said, said)
    noise = Intruder(port)
    noise.connection.sendall(b"GET / HTTP/1.1\r\n\r\n" + bytes(200))
    said = noise.refused()
    check("bytes that are no message", "not Twill's" in said, said)
    outside = Intruder(port)
    mine = outside.hello(5, 2, SECRET)
    try:
        kind, body = read_message(outside.connection)
    except socket.timeout:
        kind, body = None, b""
    verdict = body[64:].decode()
    proved = body[:64].decode() == proof(
        SECRET, f"hub|{outside.nonce}|{mine}|5|{verdict}")
    check("a proved hello of rank 5 of 2",
          kind == ANSWER and proved and
          verdict == "rank 5 is none of the job's 2 ranks", verdict)
    began = time.time()
    silent = Intruder(port)
    said = silent.refused()
    waited = time.time() - began
    check("a connection that says nothing", "in 10 s" in said and
          9 <= waited <= 20, f"after {waited:.1f} s: {said}")

    other = this_machines_other_address()
    if other:
        try:
            socket.create_connection((other, port), 2).close()
            check(f"a connection to {other} (MASTER_ADDR is 127.0.0.1)",
                  False, "it was accepted")
        except OSError as error:
            check(f"a connection to {other} (MASTER_ADDR is 127.0.0.1)",
                  True, f"({error.strerror})")

    rank1 = start(lambda rank: command, 1, port, RANK="1", WORLD_SIZE="2",
                  TWILL_JOB_SECRET=SECRET)
    (code0, output0), (code1, output1) = finish(rank0 + rank1)
    if code0 or code1:
        failures.append(f"the job after the intruders: exits {code0}, "
                        f"{code1}:\n{output0[-1500:]}\n{output1[-800:]}")
        return
    named = [i.name for i in (no_secret, wrong, noise, outside, silent)
             if f"refused a connection from {i.name}" not in output0]
    if named:
        failures.append(f"rank 0 did not name {named}:\n{output0[-1500:]}")
    failures.extend(what for what, ok in checks if not ok)
    got = losses(args, "intruders")
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, reference))
    if len(got) != len(reference) or worst > TOLERANCE:
        failures.append(f"after intruders: losses {got} vs 1x1 {reference}")
    print(f"the job after the intruders: {len(got)} losses within "
          f"{worst:.1e} of 1x1's")


def duplicate_rank(args, train, reference, failures):
    """Rank 0, rank 1 and a second rank 1, with the machine's own secret."""
    program = compile_job(args, 1, 2, "duplicate")
    command = train + [str(program), "--data", str(args.data)]
    port = free_port()
    processes = start(lambda rank: command, 2, port)
    processes += start(lambda rank: command, 1, port, RANK="1",
                       WORLD_SIZE="2")
    ran = finish(processes)
    refused = [output for code, output in ran[1:] if code != 0 and
               "rank 0's hub refused this rank: rank 1 has joined already"
               in output]
    trained = ran[0][0] == 0 and sum(code == 0 for code, _ in ran[1:]) == 1
    got = losses(args, "duplicate") if trained else []
    close = len(got) == len(reference) and all(
        abs(a - b) <= TOLERANCE * abs(b) for a, b in zip(got, reference))
    if not (trained and len(refused) == 1 and close):
        failures.append("a duplicate rank 1: " + " / ".join(
            f"exit {code}: {output[-400:]}" for code, output in ran))
    else:
        print("a second rank 1: refused by name, the job trained as 1x1")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    args = parser.parse_args()
    subprocess.run(["rm", "-rf", str(args.work)], check=True)
    args.work.mkdir(parents=True)
    train = [str(args.bin / "twill-train")]
    os.environ.pop("TWILL_JOB_SECRET", None)
    os.environ.pop("TWILL_JOB_SECRET_FILE", None)

    alone = compile_job(args, 1, 1, "alone")
    subprocess.run(train + [str(alone), "--data", str(args.data)],
                   check=True, capture_output=True)
    reference = losses(args, "alone")
    failures = []
    try:
        intruders_first(args, train, reference, failures)
    except (OSError, AssertionError, TypeError) as error:
        failures.append(f"the hub did not stay to refuse the intruders: "
                        f"{error!r}")
    duplicate_rank(args, train, reference, failures)
    if failures:
        sys.exit("FAILED:\n" + "\n".join(failures))
    print("socket intruders: ok")


if __name__ == "__main__":
    main()
