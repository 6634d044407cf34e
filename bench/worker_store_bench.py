"""`bench/run.sh --only worker_store`: the workers' TCPStore served by the
agent (group rank 0's, here a --standalone agent) against one hosted by a
Python process (worker rank 0's, TORCHELASTIC_USE_AGENT_STORE=False), both
driven by Debian's torch 1.13 `torch.distributed.TCPStore` clients in the
same run: get/set/add/wait throughput and p50/p99 at 1, 64 and 512
clients, then the time N ranks' init_process_group (gloo, env://) takes
against each. Bounded: about 3 minutes in all."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

PYTHON = "/usr/bin/python3"
OPS = ["get", "set", "add", "wait"]
CLIENTS = [1, 64, 512]
SECONDS = 1.0
INIT_N = [8, 32, 64]
THREADS_PER_PROC = 32  # 512 clients = 16 processes on a small machine

# One client process: `threads` connections, each in its own thread; for
# each operation in turn, "go" on stdin runs it for `seconds` and prints
# the latencies (ns) as one JSON line.
CLIENT = r"""
import json, sys, threading, time
from datetime import timedelta
from torch.distributed import TCPStore
host, port, ops, threads, seconds, tag = sys.argv[1:7]
port, threads, seconds = int(port), int(threads), float(seconds)
stores = [TCPStore(host, port, is_master=False, timeout=timedelta(seconds=60))
          for _ in range(threads)]
for t, s in enumerate(stores):
    s.set(f"bench/{tag}/{t}", "x")
print("ready", flush=True)
for op in ops.split(","):
    lat = [[] for _ in range(threads)]
    barrier = threading.Barrier(threads + 1)
    stop = False
    def work(t):
        s, key, out = stores[t], f"bench/{tag}/{t}", lat[t]
        barrier.wait()
        clock = time.monotonic_ns
        while not stop:
            t0 = clock()
            if op == "get": s.get(key)
            elif op == "set": s.set(key, "x")
            elif op == "add": s.add(key + "/n", 1)
            else: s.wait([key])
            out.append(clock() - t0)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts: t.start()
    sys.stdin.readline()
    barrier.wait()
    time.sleep(seconds)
    stop = True
    for t in ts: t.join()
    print(json.dumps([x for l in lat for x in l]), flush=True)
"""

# Worker rank 0's store: a TCPStore server in a Python process.
RANK0_SERVER = r"""
import sys
from datetime import timedelta
from torch.distributed import TCPStore
s = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
             timeout=timedelta(seconds=60))
print("port", s.port, flush=True)
sys.stdin.read()
"""

# One rank of init_process_group: imports torch, waits for "go", then
# reports when init_process_group returned.
INIT_RANK = r"""
import os, sys, time
import torch.distributed as dist
from datetime import timedelta
print("ready", flush=True)
sys.stdin.readline()
dist.init_process_group("gloo", timeout=timedelta(seconds=120))
print("done", time.time(), flush=True)
dist.destroy_process_group()
"""


def pct(xs, p):
    return xs[int(p * (len(xs) - 1))] if xs else 0.0


def ops(port, clients, tag):
    """{op: {ops_per_s, p50, p99}} for every op of OPS, `clients`
    connections at once."""
    procs, left = [], clients
    while left > 0:
        t = min(THREADS_PER_PROC, left)
        left -= t
        procs.append(subprocess.Popen(
            [PYTHON, "-c", CLIENT, "127.0.0.1", str(port), ",".join(OPS),
             str(t), str(SECONDS), f"{tag}{len(procs)}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    out = {}
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for op in OPS:
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            lat = []
            for p in procs:
                lat += json.loads(p.stdout.readline())
            lat = sorted(x / 1e9 for x in lat)
            out[op] = {"ops_per_s": len(lat) / SECONDS, "p50": pct(lat, 0.5),
                       "p99": pct(lat, 0.99)}
        for p in procs:
            p.wait(60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


class AgentStore:
    """A --standalone agent whose one worker only sleeps: what the bench
    talks to is the agent's own TCPStore at MASTER_PORT."""

    def __init__(self, agent):
        self.dir = tempfile.TemporaryDirectory()
        port_file = os.path.join(self.dir.name, "port")
        self.proc = subprocess.Popen(
            [agent, "run", "--standalone", "--nproc-per-node", "1", "--",
             "sh", "-c", f'echo $MASTER_PORT > {port_file}.tmp && '
             f'mv {port_file}.tmp {port_file} && exec sleep 600'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=dict(os.environ,
                     DISTJOB_TERMINATION_LOG=os.path.join(self.dir.name,
                                                          "t")))
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise RuntimeError("the agent published no MASTER_PORT")
            time.sleep(0.05)
        with open(port_file) as f:
            self.port = int(f.read())

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.dir.cleanup()


class Rank0Store:
    def __init__(self):
        self.proc = subprocess.Popen([PYTHON, "-c", RANK0_SERVER],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            self.close()
            raise RuntimeError("TCPStore server gave no port")
        self.port = int(line[1])

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def init_time(n, agent_port, budget_s=60):
    """Seconds from "go" until all `n` ranks' init_process_group returned:
    against the agent's store at `agent_port`, or (None) with rank 0
    hosting the TCPStore as torch 1.13's workers do."""
    base = dict(os.environ, WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                OMP_NUM_THREADS="1")
    if agent_port is not None:
        # A fresh attempt prefix per run: one store serves every run.
        base.update(MASTER_PORT=str(agent_port),
                    TORCHELASTIC_USE_AGENT_STORE="True",
                    TORCHELASTIC_RESTART_COUNT=str(time.monotonic_ns()))
    else:
        base.update(MASTER_PORT=str(free_port()),
                    TORCHELASTIC_USE_AGENT_STORE="False")
    procs = []
    try:
        for r in range(n):
            procs.append(subprocess.Popen(
                [PYTHON, "-c", INIT_RANK], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True,
                env=dict(base, RANK=str(r), LOCAL_RANK=str(r))))
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        start = time.time()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        ends = []
        for p in procs:
            line = p.stdout.readline().split()
            assert line and line[0] == "done", line
            ends.append(float(line[1]))
            if time.time() - start > budget_s:
                raise TimeoutError(f"init_process_group of {n} ranks")
        for p in procs:
            p.wait(30)
        return max(ends) - start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_worker_store(reps, agent):
    """Rows for docs/bench/results.md: the agent's worker store (column
    distjob-agent) vs worker rank 0's TCPStore (column torchrun)."""
    reps = 1  # bounded: every row is one ~1 s sample of 10^3-10^5 ops
    data, init = {}, {}
    stores = {"distjob-agent": AgentStore(agent), "torchrun": Rank0Store()}
    try:
        # Starting the client processes (importing torch) is what takes
        # the time: each part stops starting new rows past its budget.
        deadline = time.monotonic() + 60
        for n in INIT_N:
            for who in stores:
                if time.monotonic() > deadline:
                    break
                port = stores[who].port if who == "distjob-agent" else None
                init.setdefault(n, {"distjob-agent": [], "torchrun": []})[
                    who].append(init_time(n, port))
        deadline = time.monotonic() + 120
        for clients in CLIENTS:
            for who, store in stores.items():
                if time.monotonic() > deadline:
                    break
                by_op = ops(store.port, clients, f"{who[0]}{clients}")
                for op, r in by_op.items():
                    for metric in ("ops_per_s", "p50", "p99"):
                        data.setdefault((op, clients, metric), {
                            "distjob-agent": [], "torchrun": []})[
                                who].append(r[metric])
    finally:
        for store in stores.values():
            store.close()
    results = []
    for (op, clients, metric), samples in data.items():
        what = {"ops_per_s": "throughput", "p50": "p50 latency",
                "p99": "p99 latency"}[metric]
        r = {"name": f"worker store {op} {what}, {clients} client"
                     f"{'s' if clients > 1 else ''} (vs rank-0 TCPStore)",
             "unit": "ops/s" if metric == "ops_per_s" else "s",
             "samples": samples, "group": "worker_store"}
        if metric == "ops_per_s":
            r["higher_better"] = True
        results.append(r)
    for n, samples in init.items():
        results.append({
            "name": f"init_process_group, {n} ranks (agent's store vs "
                    "rank-0 TCPStore)",
            "unit": "s", "samples": samples, "group": "worker_store"})
    results[-1]["note"] = (
        "Column distjob-agent: the TCPStore a `--standalone` agent serves "
        "its workers (MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True); "
        "column torchrun: a `torch.distributed.TCPStore(is_master=True)` in "
        "a Python process, as worker rank 0 hosts it. Clients: Debian's "
        f"torch 1.13 TCPStore, {THREADS_PER_PROC} threads (each its own "
        f"connection) per process, {SECONDS:.0f} s per operation and client "
        "count, one sample each (min = max). init_process_group: N "
        "processes (gloo, env://) on loopback, timed from a common go to "
        "the last return, torch already imported. Measured on a 2-core "
        "machine loaded by other builds: noisy; re-run on a quiet machine. "
        "Rows past a part's time budget (60 s for init_process_group, 120 s "
        "for the operations) are left out or have one column only. "
        "`set` returns without an answer in 1.13's client, hence its "
        "microsecond latencies; `get` is a wait and a get, two round "
        "trips.")
    return results
