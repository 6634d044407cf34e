"""`bench/run.sh --only worker_store`: the workers' TCPStore served by the
agent (group rank 0's, here a --standalone agent) against one hosted by a
Python process (worker rank 0's, TORCHELASTIC_USE_AGENT_STORE=False), both
driven by Debian's torch 1.13 `torch.distributed.TCPStore` clients (or
DISTJOB_PYTHON's) in the same run: get/set/add/wait throughput, p50/p99
and mean latency at 1, 64 and 512 clients, then the time N ranks'
init_process_group (gloo, env://) takes against each. Bounded: about 3
minutes in all."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import harness  # run.py puts tests/ on the path

PYTHON = harness.PYTHON  # DISTJOB_PYTHON overrides Debian's
OPS = ["get", "set", "set_get", "add", "wait"]
OP_NAMES = {"set_get": "set-then-get"}
CLIENTS = [1, 64, 512]
# Each row's samples: OPS_REPS rounds of SECONDS per operation, the
# operations taking turns (get, set, ..., get, set, ...), so that a row's
# min-max says whether a ratio near 1.0 is one: single 1 s samples had
# moved rows across 1.0 between runs.
OPS_REPS = 3
SECONDS = 0.5
INIT_N = [8, 16, 32, 64, 128, 256]
INIT_REPS = 2
# A run of N ranks that takes over INIT_ONCE_S is not repeated (once per
# side says enough), and one past INIT_RUN_BUDGET_S is stopped and ends
# the part: 128 ranks on 2 cores are CPU-starved on either side (23-27 s
# against 27-44 s in the committed runs of docs/bench/results.md), and a
# 30 s budget cut off whichever side it fell on.
INIT_ONCE_S = 10
INIT_RUN_BUDGET_S = 45
# Ranks of gloo's key pattern without gloo (CLIENT's mesh), one run per N
# and side: the store's own part of init_process_group at the N where the
# real one does not finish on 2 cores.
MESH_N = [128, 256]
# No larger N is started past this (seconds into the part); the quiet-machine
# sweep reaches larger N than a loaded one, and the note says which ran.
INIT_BUDGET_S = 60
THREADS_PER_PROC = 32  # 512 clients = 16 processes on a small machine

# The one TCPStore client of both bench sections (this one and run.py's
# `store`), for run.py's merged_ops, one round per operation of its list:
# this process imports torch once and forks `procs` children of `threads`
# connections each (importing torch in 16 processes took most of the old
# section's budget on 2 cores, which is why its 512-client TCPStore rows
# were missing); "go" on stdin runs the next operation for `seconds` in
# all of them and prints their latencies (ns) merged as one JSON line.
# Operations: get, set, add, wait (a key that exists), set_get (a set
# timed with the get that follows it: 1.13's set has no answer),
# compare_set, and mesh: gloo's init_process_group key pattern without gloo
# (each connection one rank of procs x threads: it sets its address key of
# 40 bytes per rank, gets every other rank's, adds one to a barrier counter
# and polls it with add 0 every 10 ms until all arrived), once, its one
# latency the time from the common go to its end.
CLIENT = r"""
import json, os, sys, threading, time
from datetime import timedelta
from torch.distributed import TCPStore
host, port, ops, threads, procs, seconds, tag = sys.argv[1:8]
port, threads, procs, seconds = int(port), int(threads), int(procs), float(seconds)
ops = ops.split(",")

def child(i, cmd, res):
    stores = [TCPStore(host, port, is_master=False,
                       timeout=timedelta(seconds=60)) for _ in range(threads)]
    for t, s in enumerate(stores):
        s.set(f"bench/{tag}/{i}/{t}", "x")
    res.write("ready\n"); res.flush()
    for op in ops:
        lat = [[] for _ in range(threads)]
        barrier = threading.Barrier(threads + 1)
        stop = False
        def work(t):
            s, key, out = stores[t], f"bench/{tag}/{i}/{t}", lat[t]
            barrier.wait()
            clock = time.monotonic_ns
            if op == "mesh":
                t0, n, r = clock(), procs * threads, i * threads + t
                try:
                    s.set(f"mesh/{tag}/{r}", "a" * (40 * n))
                    for j in range(n):
                        if j != r: s.get(f"mesh/{tag}/{j}")
                    s.add(f"mesh/{tag}/n", 1)
                    # Bounded: a rank that died leaves the count short.
                    while s.add(f"mesh/{tag}/n", 0) != n:
                        if clock() - t0 > 60e9: raise TimeoutError
                        time.sleep(0.01)
                    out.append(clock() - t0)
                except Exception:  # a client timeout too: not finished
                    out.append(float("inf"))
                return
            while not stop:
                t0 = clock()
                if op == "get": s.get(key)
                elif op == "set": s.set(key, "x")
                elif op == "set_get": s.set(key, "x"); s.get(key)
                elif op == "add": s.add(key + "/n", 1)
                elif op == "wait": s.wait([key])
                else: s.compare_set(key, "x", "x")
                out.append(clock() - t0)
        ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for t in ts: t.start()
        cmd.readline()
        barrier.wait()
        time.sleep(seconds)
        stop = True
        for t in ts: t.join()
        res.write(json.dumps([x for l in lat for x in l]) + "\n"); res.flush()

kids = []
for i in range(procs):
    c_r, c_w = os.pipe()
    r_r, r_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(c_w); os.close(r_r)
        try:
            child(i, os.fdopen(c_r), os.fdopen(r_w, "w"))
        finally:
            os._exit(0)
    os.close(c_r); os.close(r_w)
    kids.append((pid, os.fdopen(c_w, "w"), os.fdopen(r_r)))
for _, _, res in kids:
    assert res.readline().strip() == "ready"
print("ready", flush=True)
for op in ops:
    sys.stdin.readline()
    for _, cmd, _ in kids:
        cmd.write("go\n"); cmd.flush()
    lat = []
    for _, _, res in kids:
        lat += json.loads(res.readline())
    print(json.dumps(lat), flush=True)
for pid, _, _ in kids:
    os.waitpid(pid, 0)
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

# N ranks of init_process_group (gloo, env://), forked from one process
# that imported torch: each line on stdin ("<world> <MASTER_PORT> <agent
# store: 1/0> <restart count>") forks the N ranks, lets them go together,
# and prints the seconds until the last init_process_group returned (or
# "timeout" past the budget, the ranks killed). The ranks leave only once
# all are done: rank 0 hosts the TCPStore when the agent does not.
INIT = r"""
import os, select, signal, sys, time
import torch.distributed as dist
from datetime import timedelta
budget = float(sys.argv[1])
for line in sys.stdin:
    n, port, agent, count = line.split()
    n = int(n)
    env = dict(WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
               OMP_NUM_THREADS="1", TORCHELASTIC_RESTART_COUNT=count,
               TORCHELASTIC_USE_AGENT_STORE="True" if agent == "1" else "False")
    done_r, done_w = os.pipe()
    kids = []
    for r in range(n):
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(go_w); os.close(done_r)
            code = 1
            try:
                os.environ.update(env, RANK=str(r), LOCAL_RANK=str(r))
                os.read(go_r, 1)
                dist.init_process_group("gloo", timeout=timedelta(seconds=budget))
                os.write(done_w, b"%r\n" % time.time())
                os.read(go_r, 1)
                dist.destroy_process_group()
                code = 0
            finally:
                os._exit(code)
        os.close(go_r)
        kids.append((pid, go_w))
    os.close(done_w)
    start = time.time()
    for _, go in kids:
        os.write(go, b"g")
    ends, buf, deadline = [], b"", time.monotonic() + budget
    while len(ends) < n and time.monotonic() < deadline:
        if select.select([done_r], [], [], 0.5)[0]:
            chunk = os.read(done_r, 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            ends += [float(x) for x in lines]
    if len(ends) < n:
        for pid, _ in kids:
            os.kill(pid, signal.SIGKILL)
        print("timeout", len(ends), flush=True)
    else:
        print("took", max(ends) - start, flush=True)
    for pid, go in kids:
        try:
            os.write(go, b"x")
        except OSError:
            pass
        os.close(go)
    for pid, _ in kids:
        os.waitpid(pid, 0)
    os.close(done_r)
"""


def client_argv(port, ops, clients, threads_per_proc, seconds, tag):
    """The CLIENT command line for `clients` connections at once,
    `threads_per_proc` to a process: run.py's merged_ops runs it, with
    rounds=len(ops)."""
    procs = -(-clients // threads_per_proc)
    threads = min(clients, threads_per_proc)
    return [PYTHON, "-c", CLIENT, "127.0.0.1", str(port), ",".join(ops),
            str(threads), str(procs), str(seconds), tag]


def mesh_seconds(port, ranks, tag):
    """Seconds until the last of `ranks` connections (THREADS_PER_PROC to a
    process) finished gloo's key pattern (CLIENT's mesh) against `port`."""
    argv = client_argv(port, ["mesh"], ranks, THREADS_PER_PROC, 0, tag)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"mesh of {ranks}: the clients did not start")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        took = max(json.loads(proc.stdout.readline())) / 1e9
        if proc.wait(60) != 0:
            raise RuntimeError(f"mesh of {ranks}: exit {proc.returncode}")
        return took
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def sched_s(pid):
    """(on a CPU, waiting for one) in seconds, summed over `pid`'s threads
    (/proc schedstat): how much of a run the agent's store was starved."""
    run = wait = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                fields = f.read().split()
        except FileNotFoundError:
            continue
        run += int(fields[0])
        wait += int(fields[1])
    return run / 1e9, wait / 1e9


def sleeps(pid):
    """Voluntary context switches of `pid`'s threads (/proc): how often
    the store's process went to sleep waiting for work."""
    n = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        n += int(line.split()[1])
        except FileNotFoundError:
            continue
    return n


def cpu_seconds(pid):
    """CPU time of `pid`, all its threads, user and system (/proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tcp_segments():
    """TCP segments this machine has sent (/proc/net/snmp, Tcp OutSegs):
    on a quiet machine, the bench's loopback traffic, data and
    acknowledgements of both ends."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Tcp:")]
    return int(rows[1][rows[0].index("OutSegs")])


def tcp_data_segments():
    """Of tcp_segments, those that carried data (/proc/net/netstat, TcpExt
    TCPOrigDataSent): in a `set` round on a quiet machine, the clients'
    sends; the rest are acknowledgements. NaN where the kernel does not
    count them."""
    with open("/proc/net/netstat") as f:
        rows = [line.split() for line in f if line.startswith("TcpExt:")]
    if len(rows) < 2 or "TCPOrigDataSent" not in rows[0]:
        return float("nan")
    return int(rows[1][rows[0].index("TCPOrigDataSent")])


def ops(merged_ops, store, clients, tag):
    """{op: [{ops_per_s, p50, p99, mean, n, probed}, one per rep]} for every
    op of OPS, `clients` connections at once (run.py's merged_ops, one
    round per op and rep, OPS_REPS passes over OPS); probed: the store
    process's sleeps and CPU seconds and the machine's TCP segments (all,
    and those with data) over the round."""
    rounds = merged_ops([client_argv(store.port, OPS * OPS_REPS, clients,
                                     THREADS_PER_PROC, SECONDS, tag)],
                        rounds=len(OPS) * OPS_REPS,
                        probe=lambda: {"sleeps": sleeps(store.proc.pid),
                                       "cpu": cpu_seconds(store.proc.pid),
                                       "segments": tcp_segments(),
                                       "data_segments": tcp_data_segments()},
                        seconds=SECONDS)
    by_op = {}
    for op, r in zip(OPS * OPS_REPS, rounds):
        by_op.setdefault(op, []).append(r)
    return by_op


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


def torch_version():
    """PYTHON's PyTorch, as the note names it: "torch 1.13.0a0"."""
    out = subprocess.run(
        [PYTHON, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True).stdout.strip()
    return f"torch {out or '(unknown)'}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InitRanks:
    """The process that forks N ranks per line (INIT)."""

    def __init__(self, budget_s):
        self.proc = subprocess.Popen([PYTHON, "-c", INIT, str(budget_s)],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def time(self, n, port, agent):
        """Seconds until all `n` ranks' init_process_group returned, or
        None past the budget."""
        # A fresh attempt prefix per run: one agent store serves them all.
        self.proc.stdin.write(f"{n} {port} {int(agent)} "
                              f"{time.monotonic_ns()}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        if not line:
            raise RuntimeError(f"init_process_group of {n} ranks: no answer")
        return float(line[1]) if line[0] == "took" else None

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def per_set(probed, who, key):
    """One side's probed count per operation, NaN where it is missing."""
    return probed.get(who, {}).get(key, float("nan"))


def bench_worker_store(reps, agent, merged_ops):
    """Rows for docs/bench/results.md: the agent's worker store (column
    distjob-agent) vs worker rank 0's TCPStore (column torchrun), run.py's
    merged_ops driving the clients."""
    del reps  # bounded: OPS_REPS samples of 10^3-10^5 ops per ops row
    # The load before, not after: the section's own 512 clients and 128
    # gloo ranks raise the average it leaves behind.
    load_before = os.getloadavg()[0]
    data, init, mesh, skipped, timed_out = {}, {}, {}, [], []
    # (op, clients): {side: {"sleeps"/"segments"/...: per operation}}
    probed = {}
    busy = {}  # (op, clients): {side: the store's CPU seconds per second}
    starved = {}  # N: the agent's (CPU, run-queue wait) over its init runs
    stores = {"distjob-agent": AgentStore(agent), "torchrun": Rank0Store()}
    ranks = None
    try:
        for i, clients in enumerate(CLIENTS):
            # Each side first at every other client count: a single 1 s
            # sample at 1 client moved with whichever ran first.
            order = list(stores.items())
            for who, store in order[::-1] if i % 2 else order:
                by_op = ops(merged_ops, store, clients, f"{who[0]}{clients}")
                for op, reps_of_op in by_op.items():
                    # Per operation over all reps: totals over total ops.
                    n = max(sum(r["n"] for r in reps_of_op), 1)
                    probed.setdefault((op, clients), {})[who] = {
                        k: sum(r["probed"][k] for r in reps_of_op) / n
                        for k in reps_of_op[0]["probed"]}
                    busy.setdefault((op, clients), {})[who] = sum(
                        r["probed"]["cpu"] for r in reps_of_op) / (
                            SECONDS * len(reps_of_op))
                    for r in reps_of_op:
                        for metric in ("ops_per_s", "p50", "p99",
                                       "mean"):
                            data.setdefault((op, clients, metric), {
                                "distjob-agent": [], "torchrun": []})[
                                    who].append(r[metric])
        # The store's part of init_process_group at N ranks, without gloo.
        for n in MESH_N:
            for who, store in stores.items():
                mesh.setdefault(n, {"distjob-agent": [], "torchrun": []})[
                    who].append(mesh_seconds(store.port, n,
                                             f"{who[0]}{time.monotonic_ns()}"))
        # Started only now: its torch import does not share the CPU with
        # the rows above.
        ranks = InitRanks(budget_s=INIT_RUN_BUDGET_S)
        # N ranks at a time against each store in turn, INIT_REPS times,
        # each side first in every other run; no larger N once the part's
        # budget is spent.
        deadline = time.monotonic() + INIT_BUDGET_S
        turn = 0
        for n in INIT_N:
            if time.monotonic() > deadline or timed_out:
                skipped.append(n)
                continue
            row = init.setdefault(n, {"distjob-agent": [], "torchrun": []})
            for _ in range(INIT_REPS):
                # Each side ran this N once: enough to say.
                if timed_out or any(t > INIT_ONCE_S
                                    for ts in row.values() for t in ts):
                    break
                order = list(stores)
                turn += 1
                for who in order[::-1] if turn % 2 else order:
                    agent_side = who == "distjob-agent"
                    if agent_side:
                        # A fresh agent per run, as a fresh rank 0 on the
                        # other side: 2.x clients put no per-attempt prefix
                        # on their keys, and the agent clears its store only
                        # when it starts an attempt, which these runs are
                        # not (their restart counts are made up).
                        stores[who].close()
                        stores[who] = AgentStore(agent)
                    store = stores[who]
                    before = sched_s(store.proc.pid) if agent_side else None
                    t = ranks.time(n, store.port if agent_side else
                                   free_port(), agent_side)
                    if agent_side:
                        after = sched_s(store.proc.pid)
                        was = starved.get(n, (0.0, 0.0))
                        starved[n] = (was[0] + after[0] - before[0],
                                      was[1] + after[1] - before[1])
                    if t is None:  # shown as infinite; no larger N
                        timed_out.append(f"{n} ranks against {who}'s store")
                        t = float("inf")
                    row[who].append(t)
    finally:
        if ranks is not None:
            ranks.close()
        for store in stores.values():
            store.close()
    results = []
    for (op, clients, metric), samples in data.items():
        what = {"ops_per_s": "throughput", "p50": "p50 latency",
                "p99": "p99 latency", "mean": "mean latency"}[metric]
        r = {"name": f"worker store {OP_NAMES.get(op, op)} {what}, "
                     f"{clients} client"
                     f"{'s' if clients > 1 else ''} (vs rank-0 TCPStore)",
             "unit": "ops/s" if metric == "ops_per_s" else "s",
             "samples": samples, "group": "worker_store"}
        if metric == "ops_per_s":
            r["higher_better"] = True
        results.append(r)
    for n, samples in mesh.items():
        results.append({
            "name": f"gloo's store requests without gloo, {n} ranks (agent's "
                    "store vs rank-0 TCPStore)",
            "unit": "s", "samples": samples, "group": "worker_store"})
    for n, samples in init.items():
        results.append({
            "name": f"init_process_group, {n} ranks (agent's store vs "
                    "rank-0 TCPStore)",
            "unit": "s", "samples": samples, "group": "worker_store"})
    loaded = load_before > os.cpu_count()
    results[-1]["note"] = (
        "Column distjob-agent: the TCPStore a `--standalone` agent serves "
        "its workers (MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True); "
        "column torchrun: a `torch.distributed.TCPStore(is_master=True)` in "
        "a Python process, as worker rank 0 hosts it. Clients: "
        f"{torch_version()}'s TCPStore, {THREADS_PER_PROC} threads (each "
        "its own "
        "connection) per process, the processes forked from one that "
        f"imported torch; {OPS_REPS} samples of {SECONDS:g} s per "
        "operation and client count (min–max), the operations taking "
        "turns, each store measured first at every other client count. "
        "gloo's store requests without gloo: N "
        "connections, one per rank, make the requests a gloo rank makes of "
        "the store in init_process_group (set its address key of 40 bytes "
        "per rank, get every other rank's, add to a barrier counter and "
        "poll it every 10 ms), timed from a common go to the last rank's "
        "end, one run per N and side. init_process_group: N ranks (gloo, "
        "env://) forked from one process that imported torch, timed from a "
        "common go to the last return, rank 0 hosting the TCPStore in the "
        "torchrun column and a fresh agent serving it in the other; "
        f"{INIT_REPS} runs per N and side, each side first in every "
        "other run (min–max), one where a run of that N took over "
        f"{INIT_ONCE_S} s or did not finish. "
        f"1-minute load average {load_before:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after this section (its own clients "
        f"and ranks), on {os.cpu_count()} CPUs"
        f"{': measured under load' if loaded else ''}"
        ". `set` returns without an answer in TCPStore's client (1.13's "
        "and 2.x's), hence its "
        "microsecond latencies, and its row is the client's own time to "
        "send: mostly its kernel's, per TCP segment. The client sends a "
        "set's type byte on its own and the rest (key, value) corked, so a "
        "set is up to two segments, but only while its congestion window "
        "has room: with the window full of segments the store has not yet "
        "acknowledged, the set stays in the kernel's send queue, merged "
        "with the sets after it, and the call returns at once. The "
        "store acknowledges when it reads, so the sooner it reads the "
        "more of the client's sets pay for a segment (the agent's store "
        "pauses 50 µs before reading a stream of sets that answered no "
        "one, `set_stream_pause`, so that one read and one acknowledgement "
        "take many): set-then-get (a set timed with the get of the same "
        "key that follows) is the time of a set that someone reads. `get` "
        "is a wait and a get, two round trips. The mean latency rows: "
        "each client's operation still running at a round's end finishes "
        "and counts, so a client the store kept waiting weighs in the "
        "mean by its time, where a percentile over operations counts its "
        "one operation like a busy client's many. TCP segments sent per "
        "set (the machine's, /proc/net/snmp, data and acknowledgements; of "
        "them with data, on a quiet machine the clients' sends: "
        "/proc/net/netstat TCPOrigDataSent), the store process's sleeps "
        "per set (voluntary context switches of its threads, /proc) and "
        "its CPU per set (/proc, all its threads; the store's own share of "
        "a set, which the rows do not show): " + "; ".join(
            f"{clients} client{'s' if clients > 1 else ''} "
            f"{per_set(w, 'distjob-agent', 'segments'):.2f} segments "
            f"({per_set(w, 'distjob-agent', 'data_segments'):.2f} with "
            f"data), {per_set(w, 'distjob-agent', 'sleeps'):.2f} sleeps and "
            f"{per_set(w, 'distjob-agent', 'cpu') * 1e6:.2f} µs (agent) "
            f"against {per_set(w, 'torchrun', 'segments'):.2f} "
            f"({per_set(w, 'torchrun', 'data_segments'):.2f}), "
            f"{per_set(w, 'torchrun', 'sleeps'):.2f} and "
            f"{per_set(w, 'torchrun', 'cpu') * 1e6:.2f} µs (TCPStore)"
            for (op, clients), w in sorted(probed.items()) if op == "set") +
        ". The store process's CPU over the `get` rounds (a share of "
        f"one core; the rest of the {os.cpu_count()} cores ran the "
        "clients): " + "; ".join(
            f"{clients} client{'s' if clients > 1 else ''} "
            f"{b.get('distjob-agent', float('nan')):.0%} (agent) against "
            f"{b.get('torchrun', float('nan')):.0%} (TCPStore)"
            for (op, clients), b in sorted(busy.items()) if op == "get") +
        "." +
        (f" N = {', '.join(map(str, skipped))} not run: the part's "
         f"{INIT_BUDGET_S} s budget was spent or a smaller N did not "
         "finish." if skipped else "") +
        (f" Not finished within {INIT_RUN_BUDGET_S} s: "
         f"{'; '.join(timed_out)}."
         if timed_out else "") +
        "".join(f" The agent's threads over its {n}-rank runs: "
                f"{cpu:.2f} s on a CPU, {wait:.1f} s runnable but waiting "
                "for one (/proc schedstat)."
                for n, (cpu, wait) in sorted(starved.items())[-1:]))
    return results
