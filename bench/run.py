#!/usr/bin/env python3
"""Benchmarks distjob-agent against Debian's torchrun, side by side.

    /usr/bin/python3 bench/run.py [--reps N] [--only NAME,...]

Builds nothing: run `bazel build //agent:distjob-agent //bench:all` first
(bench/run.sh does both). Each benchmark alternates the two launchers,
repetition by repetition, so drift on the machine hits both alike. Results
go to docs/bench/results.json, docs/bench/results.md and docs/bench/*.png.
The method is in docs/bench/README.md.
"""

import argparse
import contextlib
import json
import math
import os
import pathlib
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import harness  # noqa: E402  (descendants, wait_for: one copy for both)
import mpi_start  # noqa: E402  (--only mpi_start)
import worker_store_bench  # noqa: E402  (--only worker_store)
import worker_store_scale  # noqa: E402  (--only worker_store_scale)
import worker_store_allgather  # noqa: E402  (--only worker_store_allgather)
AGENT = os.environ.get("DISTJOB_AGENT",
                       str(ROOT / "bazel-bin" / "agent" / "distjob-agent"))
STAMP = str(ROOT / "bazel-bin" / "bench" / "stamp")
STORE_BENCH = str(ROOT / "bazel-bin" / "bench" / "store_bench")
PYTHON = harness.PYTHON  # DISTJOB_PYTHON overrides Debian's
TORCHRUN = [PYTHON, str(ROOT / "bench" / "torchrun_fixed.py")]
# DISTJOB_BENCH_OUT: elsewhere, for a run that must not touch the committed
# results (tests/device/check.sh on a machine with PyTorch 2.x).
OUT = pathlib.Path(os.environ.get("DISTJOB_BENCH_OUT", ROOT / "docs" / "bench"))


def run_measured(argv, env=None, timeout=120):
    """Runs argv to success; returns its wall time in seconds."""
    return run_measured_cpu(argv, env=env, timeout=timeout)[0]


def run_measured_cpu(argv, env=None, timeout=120):
    """Runs argv to success; returns (wall, user+system CPU) in seconds."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            proc.kill()
            os.wait4(proc.pid, 0)
            raise TimeoutError(" ".join(argv))
        time.sleep(0.0005)
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{argv} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime


def peak_rss_mb(argv, timeout=120):
    """Peak RSS of the launcher process itself, in MB.

    Measured by GNU time (getrusage of its child), not from Python: a child
    forked from this Python process would report Python's RSS, since
    ru_maxrss survives exec.
    """
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%M"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=timeout, check=True)
        return int(out.read().split()[-1]) / 1024.0


def read_stamps(path):
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        restart, what, ns = line.split()
        rows.append((int(restart), what, int(ns)))
    return rows


# -- benchmarks -------------------------------------------------------------

def bench_launch(reps):
    """Launch overhead: --standalone --nproc-per-node 1 -- /bin/true."""
    launchers = {
        "distjob-agent": [AGENT, "run", "--standalone", "--nproc-per-node",
                          "1", "--", "/bin/true"],
        "torchrun": TORCHRUN + ["--standalone", "--nproc_per_node", "1",
                                "--monitor_interval", "0.1", "--no_python",
                                "/bin/true"],
    }
    wall = {k: [] for k in launchers}
    rss = {k: [] for k in launchers}
    for _ in range(reps):
        for name, argv in launchers.items():
            wall[name].append(run_measured(argv))
            rss[name].append(peak_rss_mb(argv))
    return [
        {"name": "launch overhead (wall)", "unit": "s", "samples": wall,
         "target": {"distjob-agent": 0.010}},
        {"name": "launch overhead (peak RSS)", "unit": "MB", "samples": rss,
         "target": {"distjob-agent": 15.0}},
    ]


def bench_restart_standalone(reps):
    """Restart latency, standalone: worker exits 137 in attempt 0; time from
    that exit to the first instruction of its successor."""
    samples = {"distjob-agent": [], "torchrun": []}
    for _ in range(reps):
        for name in samples:
            with tempfile.TemporaryDirectory() as tmp:
                stamps = os.path.join(tmp, "stamps")
                worker = [STAMP, stamps, "137"]
                if name == "distjob-agent":
                    argv = [AGENT, "run", "--standalone", "--max-restarts",
                            "1", "--"] + worker
                else:
                    argv = TORCHRUN + ["--standalone", "--max_restarts", "1",
                                       "--monitor_interval", "0.1",
                                       "--no_python"] + worker
                run_measured(argv)
                rows = read_stamps(stamps)
                exit0 = [ns for r, w, ns in rows if r == 0 and w == "exit"][0]
                start1 = [ns for r, w, ns in rows if r == 1 and w == "start"][0]
                samples[name].append((start1 - exit0) / 1e9)
    return [{"name": "restart latency, standalone", "unit": "s",
             "samples": samples, "target": {"distjob-agent": 0.020}}]


# -- multi-node helpers -----------------------------------------------------

def wait_for(pred, timeout, what):
    """tests/harness.wait_for, polling every 2 ms."""
    return harness.wait_for(pred, timeout, interval=0.002, what=what)


class Nodes:
    """N launchers of one job on loopback, each its own 127.0.0.x, each
    worker stamping into its own file; killed whatever happens."""

    def __init__(self, launcher, tmp, nnodes, conf="", max_restarts=0,
                 fail_node=None, hold=False, backend="c10d", endpoint=None,
                 rdzv_id="bench"):
        self.launcher, self.tmp, self.nnodes = launcher, tmp, nnodes
        self.conf, self.max_restarts = conf, max_restarts
        self.fail_node, self.hold = fail_node, hold
        # etcd: `endpoint` names the cluster and no node hosts a store.
        self.backend, self.rdzv_id = backend, rdzv_id
        self.port = harness.free_port()
        self.endpoint = endpoint or f"127.0.0.1:{self.port}"
        self.procs = {}
        self.background = harness.Background()

    def stamps(self, i):
        return os.path.join(self.tmp, f"stamps{i}")

    def worker(self, i):
        code = "137" if i == self.fail_node else "0"
        return [STAMP, self.stamps(i), code] + ([self.tmp] if self.hold else [])

    def start(self, i):
        host = "is_host=1" if i == 0 else "is_host=0"
        if self.backend != "c10d":
            host = ""
        conf = ",".join(x for x in (host, self.conf) if x)
        endpoint = self.endpoint
        if self.launcher == "distjob-agent":
            argv = [AGENT, "run", "--nnodes", str(self.nnodes),
                    "--nproc-per-node", "1", "--rdzv-backend", self.backend,
                    "--rdzv-endpoint", endpoint, "--rdzv-id", self.rdzv_id,
                    "--rdzv-conf", conf, "--local-addr", f"127.0.0.{i + 1}",
                    "--max-restarts", str(self.max_restarts),
                    "--no-python"] + self.worker(i)
        else:
            argv = TORCHRUN + ["--nnodes", str(self.nnodes),
                               "--nproc_per_node", "1", "--rdzv_backend",
                               "c10d", "--rdzv_endpoint", endpoint,
                               "--rdzv_id", "bench", "--rdzv_conf", conf,
                               "--max_restarts", str(self.max_restarts),
                               "--monitor_interval", "0.1",
                               "--no_python"] + self.worker(i)
        env = dict(os.environ)
        env["DISTJOB_TERMINATION_LOG"] = os.path.join(self.tmp, f"term{i}")
        self.procs[i] = self.background.start(
            argv, env=env, stdout=subprocess.DEVNULL,
            log=os.path.join(self.tmp, f"log{i}"))

    def starts(self, i, after=0):
        try:
            rows = read_stamps(self.stamps(i))
        except (OSError, ValueError):
            return []
        return [ns for _, w, ns in rows if w == "start" and ns > after]

    def first_start_after(self, nodes, after):
        """Latest, over `nodes`, of each node's first start after `after`;
        None until every node has one."""
        firsts = []
        for i in nodes:
            xs = self.starts(i, after)
            if not xs:
                return None
            firsts.append(min(xs))
        return max(firsts)

    def kill9(self, i):
        harness.kill_tree(self.procs[i])

    def finish(self, timeout=60):
        pathlib.Path(self.tmp, "go").write_text("go")
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            p.wait(max(0.1, deadline - time.monotonic()))

    def cleanup(self):
        self.background.close()


RDZV_AGENT_N = [2, 4, 8, 16, 32, 64]
RDZV_TORCHRUN_N = [2, 4, 8]


def rdzv_once(launcher, n, **nodes_kw):
    """One rendezvous of `n` launchers (Nodes' keywords pick the backend):
    seconds from the first launcher's start to the last worker's first
    instruction."""
    with tempfile.TemporaryDirectory() as tmp:
        job = Nodes(launcher, tmp, n, **nodes_kw)
        try:
            t0 = time.monotonic_ns()
            for i in range(n):
                job.start(i)
            last = wait_for(lambda: job.first_start_after(range(n), 0),
                            120, f"{launcher} rendezvous of {n}")
            job.finish()
        finally:
            job.cleanup()
    return (last - t0) / 1e9


def bench_rdzv(reps):
    """Rendezvous latency vs N: from the first launcher's start to the last
    worker's first instruction, fixed --nnodes N."""
    series = {"distjob-agent": {}, "torchrun": {}}
    # torchrun's 8 nodes alone take ~10-30 s here: at most 3 repetitions
    # keep the whole command under 10 minutes.
    for _ in range(min(reps, 3)):
        for n in RDZV_AGENT_N:
            for launcher in series:
                if launcher == "torchrun" and n not in RDZV_TORCHRUN_N:
                    continue
                series[launcher].setdefault(str(n), []).append(
                    rdzv_once(launcher, n))
    results = [{"name": "rendezvous latency vs N", "unit": "s",
                "series": series, "plot": "rendezvous",
                "xlabel": "nodes (--nnodes N, loopback)", "samples": {}}]
    for n in RDZV_AGENT_N:
        samples = {k: v.get(str(n), []) for k, v in series.items()}
        results.append({
            "name": f"rendezvous latency, {n} nodes", "unit": "s",
            "samples": samples,
            "target": {"distjob-agent": 0.100} if n == 8 else {}})
    results[-1]["note"] = (
        "torchrun 1.13 sleeps a random 0–0.3 s before it joins "
        "(`_delay(seconds=(0, 0.3))` in its dynamic rendezvous), so "
        "part of its latency and most of its spread is that jitter. "
        f"torchrun runs only for N = {RDZV_TORCHRUN_N}: each node is a "
        "Python process of ~240 MB that takes about a second of CPU to "
        "start, which is all this 2-core machine holds.")
    return results


def bench_restart_multi(reps, n=4):
    """Restart latency on 4 nodes: node 0's worker exits 137 in attempt 0;
    from its exit to the last node's successor worker's first instruction."""
    samples = {"distjob-agent": [], "torchrun": []}
    for _ in range(reps):
        for launcher in samples:
            with tempfile.TemporaryDirectory() as tmp:
                job = Nodes(launcher, tmp, n, max_restarts=1, fail_node=0,
                            hold=True)
                try:
                    for i in range(n):
                        job.start(i)

                    def exited():
                        try:
                            rows = read_stamps(job.stamps(0))
                        except (OSError, ValueError):
                            return None
                        xs = [ns for _, w, ns in rows if w == "exit"]
                        return xs[0] if xs else None
                    exit0 = wait_for(exited, 120, f"{launcher} first exit")
                    last = wait_for(
                        lambda: job.first_start_after(range(n), exit0), 120,
                        f"{launcher} restart of {n} nodes")
                    job.finish()
                finally:
                    job.cleanup()
                samples[launcher].append((last - exit0) / 1e9)
    return [{"name": f"restart latency, {n} nodes", "unit": "s",
             "samples": samples, "target": {"distjob-agent": 0.100}}]


KEEP_ALIVE = "keep_alive_interval=1,keep_alive_max_attempt=3"


def bench_peer_loss(reps, n=4):
    """Peer-loss recovery: --nnodes 2:4, kill -9 one agent (and its worker);
    time until every survivor's worker runs again."""
    variants = {
        "distjob-agent": ("distjob-agent", True),
        "distjob-agent, lease only": ("distjob-agent", False),
        "torchrun": ("torchrun", True),
    }
    samples = {k: [] for k in variants}
    for _ in range(min(reps, 3)):  # torchrun: ~25 s a repetition
        for name, (launcher, workers_fail) in variants.items():
            with tempfile.TemporaryDirectory() as tmp:
                conf = "last_call_timeout=1"
                if launcher == "distjob-agent" and not workers_fail:
                    conf += "," + KEEP_ALIVE
                job = Nodes(launcher, tmp, f"2:{n}", conf=conf,
                            max_restarts=3, hold=True)
                try:
                    for i in range(n):
                        job.start(i)
                    formed = wait_for(
                        lambda: job.first_start_after(range(n), 0), 120,
                        f"{name}: first round of {n}")
                    del formed
                    t_kill = time.monotonic_ns()
                    job.kill9(n - 1)
                    if workers_fail:
                        pathlib.Path(tmp, "fail").write_text("x")
                    last = wait_for(
                        lambda: job.first_start_after(range(n - 1), t_kill),
                        120, f"{name}: survivors back")
                    job.finish()
                finally:
                    job.cleanup()
                samples[name].append((last - t_kill) / 1e9)
    lease = samples.pop("distjob-agent, lease only")
    return [{"name": f"peer-loss recovery, {n} nodes (2:{n}), agent lease "
             "only", "unit": "s", "samples": {"distjob-agent": lease}},
            {"name": f"peer-loss recovery, {n} nodes (2:{n})", "unit": "s",
             "samples": samples, "note": (
                 "The survivors' workers fail as soon as the peer is killed "
                 "(the `fail` file), standing in for a collective that "
                 "breaks; torchrun 1.13 notices a lost peer only that way. "
                 "Both then re-rendezvous with `last_call_timeout=1`, which "
                 "dominates both numbers. *lease only*: no worker fails; the "
                 "agent notices the dead peer itself when its lease expires "
                 "(`keep_alive_interval=1,keep_alive_max_attempt=3`, so "
                 "≤ 3 s), then the same last call. torchrun 1.13 hard-codes "
                 "its keep-alive at 5 s × 3 and ignores both keys, and it "
                 "never restarts on a lost peer whose workers keep running.")}]


FAULT_TRAIN = str(ROOT / "bench" / "fault_train.py")
RECOVERY_CAP_S = 90.0


def train_records(tmp):
    out = []
    for path in pathlib.Path(tmp).glob("attempt-*.json"):
        with contextlib.suppress(OSError, ValueError):
            out.append(json.loads(path.read_text()))
    return out


def group_at(tmp, world, after=0.0, step=0):
    """When every rank of a `world`-rank group started after `after`
    completed `step` steps (wall clock), or None."""
    done = {}
    for r in train_records(tmp):
        if r["world"] == world and r["started"] > after and \
                r["steps_done"] > step:
            t = r["steps"][step][1]
            done[r["rank"]] = min(done.get(r["rank"], t), t)
    return max(done.values()) if len(done) == world else None


def collectives_recovery_once(launcher, n):
    """--nnodes 2:N of bench/fault_train.py (gloo DDP, an all_reduce every
    50 ms); node N-1 and its worker are SIGKILLed while the group trains:
    seconds from the kill to the first step the re-formed group completes,
    inf when the survivors gave up (exited) or took over RECOVERY_CAP_S."""
    with tempfile.TemporaryDirectory() as tmp:
        port = harness.free_port()
        procs = []
        with harness.Background() as background:
            for i in range(n):
                conf = f"is_host={int(i == 0)},last_call_timeout=1"
                if launcher == "torchrun":
                    argv = TORCHRUN + [
                        "--nnodes", f"2:{n}", "--nproc_per_node", "1",
                        "--rdzv_backend", "c10d", "--rdzv_endpoint",
                        f"127.0.0.1:{port}", "--rdzv_id", "bench",
                        "--rdzv_conf", conf, "--max_restarts", "3",
                        "--monitor_interval", "0.1", FAULT_TRAIN]
                else:
                    argv = [AGENT, "run", "--nnodes", f"2:{n}",
                            "--nproc-per-node", "1", "--rdzv-backend",
                            "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                            "--rdzv-id", "bench", "--rdzv-conf", conf,
                            "--local-addr", f"127.0.0.{i + 1}",
                            "--max-restarts", "3", PYTHON, FAULT_TRAIN]
                env = dict(os.environ, FT_DIR=tmp, FT_STEPS="100000",
                           FT_STEP_S="0.05")
                env["DISTJOB_TERMINATION_LOG"] = os.path.join(tmp, f"term{i}")
                procs.append(background.start(
                    argv, env=env, stdout=subprocess.DEVNULL,
                    log=os.path.join(tmp, f"log{i}")))
            # Polled every 20 ms: reading the records is not free on 2 cores.
            harness.wait_for(lambda: group_at(tmp, n, step=10), 120, 0.02,
                             f"{launcher}: {n} nodes training")
            killed = time.time()
            harness.kill_tree(procs[-1])

            def back():
                t = group_at(tmp, n - 1, after=killed)
                if t is not None:
                    return t - killed
                if all(p.poll() is not None for p in procs[:-1]):
                    return math.inf  # the survivors gave up
                if time.time() - killed > RECOVERY_CAP_S:
                    return math.inf
                return None
            return harness.wait_for(back, RECOVERY_CAP_S + 10, 0.02,
                                    f"{launcher}: survivors training again")


def bench_recovery_collectives(reps, n=3):
    """Recovery with real collectives: a peer lost mid-all_reduce; from
    the kill to the re-formed group's first completed step."""
    samples = {"distjob-agent": [], "torchrun": []}
    for _ in range(min(reps, 3)):  # torchrun: ~20 s a repetition
        for launcher in samples:
            samples[launcher].append(collectives_recovery_once(launcher, n))
    return [{"name": f"recovery with real collectives, {n} nodes (2:{n})",
             "unit": "s", "samples": samples, "note": (
                 "bench/fault_train.py: gloo DDP, one worker a node, an "
                 "all_reduce every 50 ms, a checkpoint every step. One "
                 "node's launcher and worker are SIGKILLed while the others "
                 "wait in the collective; the sample ends when the two left "
                 "complete their first step together (∞: they exited "
                 "instead, or took over "
                 f"{RECOVERY_CAP_S:.0f} s). `last_call_timeout=1`, "
                 "`--max-restarts 3`; torchrun 1.13 with "
                 "`--monitor_interval 0.1`.")}]


# TCPStore's set does not wait for an answer, so the two are compared on a
# set followed by a get of the same key (set_get); wait: a blocking wait on
# a key that exists (the agent's blocking get).
STORE_OPS = ["get", "set_get", "add", "compare_set", "wait"]
STORE_OP_NAMES = {"set_get": "set-then-get"}
# Clients per process on both sides: Python's TCPStore clients need it (the
# GIL), and the agent's get the same layout.
STORE_CLIENTS_PER_PROCESS = 8
STORE_CLIENTS = [1, 64]
STORE_SECONDS = 1.0


def pct(xs, p):
    return xs[int(p * (len(xs) - 1))] if xs else 0.0


def agent_store_ops(port, op, clients):
    return merged_ops([[STORE_BENCH, "ops", f"127.0.0.1:{port}", op, str(t),
                        str(STORE_SECONDS), "sync"]
                       for t in per_process(clients)])


def per_process(clients):
    """Thread counts of the client processes for `clients` clients."""
    n = STORE_CLIENTS_PER_PROCESS
    return [min(n, clients - i) for i in range(0, clients, n)]


def tree_cpu_s(procs):
    """CPU seconds of these processes and all their descendants so far:
    each process's own and its reaped children's (/proc stat utime, stime,
    cutime, cstime), exited but unreaped ones included, so that a child
    that exits as its round ends still counts."""
    children = {}
    for pid, _, parent in harness.process_table():
        children.setdefault(parent, []).append(pid)
    pids, frontier = [], [p.pid for p in procs]
    while frontier:
        pid = frontier.pop()
        pids.append(pid)
        frontier += children.get(pid, [])
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def merged_ops(argvs, rounds=None, probe=None, seconds=STORE_SECONDS):
    """Starts one client process per argv, lets them go together once all
    are connected, merges their latencies (ns, one JSON list each). With
    `rounds`, "go" starts each of that many rounds in turn (one process
    set for several operations) and the result is a list, one per round.
    With `probe` (a function returning {name: count}), each round's result
    also has "probed": how much each count grew over the round. Each
    round's result has "client_cpu_s": the CPU the client processes spent
    over it. `seconds`: each round's length, as the clients were given it.
    "mean": the mean latency, which percentiles over operations do not
    show when a store serves some clients many times while others wait
    (each client's operation in flight at the end is finished and
    counted, so a starved client's long wait is in the mean)."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
             for argv in argvs]
    results = []
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        for _ in range(rounds or 1):
            before = probe() if probe else {}
            client_cpu = tree_cpu_s(procs)
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            lat = []
            for p in procs:
                lat += json.loads(p.stdout.readline())
            client_cpu = tree_cpu_s(procs) - client_cpu
            lat = sorted(x / 1e9 for x in lat)
            results.append({"ops_per_s": len(lat) / seconds,
                            "p50": pct(lat, 0.5), "p99": pct(lat, 0.99),
                            "mean": sum(lat) / max(len(lat), 1),
                            "n": len(lat), "client_cpu_s": client_cpu})
            if probe:
                after = probe()
                results[-1]["probed"] = {k: after[k] - before[k]
                                         for k in after}
        for p in procs:
            if p.wait(60) != 0:
                raise RuntimeError(f"{p.args}: exit {p.returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results if rounds else results[0]


def tcpstore_ops(port, op, clients):
    # Python clients, each thread its own connection, as each rank of a job
    # has its own: the worker_store section's client, one operation.
    return merged_ops([worker_store_bench.client_argv(
        port, [op], clients, STORE_CLIENTS_PER_PROCESS, STORE_SECONDS,
        f"store/{op}/{clients}")])


def start_server(argv):
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "port":
        proc.kill()
        raise RuntimeError(f"{argv}: no port")
    return proc, int(line[1])


def stop_server(proc):
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bench_store(reps):
    """Store throughput and latency: the agent's gRPC store (C++ clients)
    vs PyTorch's TCPStore (Python clients), same ops, same concurrency."""
    reps = max(1, min(reps, 2))  # each sample is already ~10^3-10^5 ops
    data = {}
    # (op, clients, side): [(client CPU s, store CPU s, ops)] per round.
    cpu = {}
    for _ in range(reps):
        for launcher in ("distjob-agent", "torchrun"):
            if launcher == "distjob-agent":
                server, port = start_server([STORE_BENCH, "server"])
                measure = agent_store_ops
            else:
                server, port = start_server(
                    [PYTHON, "-c", worker_store_bench.RANK0_SERVER])
                measure = tcpstore_ops
            try:
                for clients in STORE_CLIENTS:
                    for op in STORE_OPS:
                        store_cpu = cpu_seconds(server.pid)
                        r = measure(port, op, clients)
                        cpu.setdefault((op, clients, launcher), []).append(
                            (r["client_cpu_s"],
                             cpu_seconds(server.pid) - store_cpu, r["n"]))
                        for metric in ("ops_per_s", "p50", "p99"):
                            data.setdefault((op, clients, metric), {
                                "distjob-agent": [], "torchrun": []})[
                                    launcher].append(r[metric])
            finally:
                stop_server(server)
    results = []
    for (op, clients, metric), samples in data.items():
        what = {"ops_per_s": "throughput", "p50": "p50 latency",
                "p99": "p99 latency"}[metric]
        r = {"name": f"store {STORE_OP_NAMES.get(op, op)} {what}, "
                     f"{clients} client"
                     f"{'s' if clients > 1 else ''} (vs TCPStore)",
             "unit": "ops/s" if metric == "ops_per_s" else "s",
             "samples": samples, "group": "store"}
        if metric == "ops_per_s":
            r["higher_better"] = True
        # The target of every row: TCPStore's median in the same run.
        r["target"] = {"distjob-agent": statistics.median(
            samples["torchrun"])}
        results.append(r)
    results[-1]["note"] = (
        f"{STORE_SECONDS:.0f} s per operation and client count, "
        f"{reps} repetitions alternating the stores. Agent: "
        "`bazel-bin/bench/store_bench ops`, C++ clients, each its own gRPC "
        "channel, against `store_bench server` (the agent's StoreServer "
        "alone in a process). TCPStore: `torch.distributed.TCPStore` "
        "server in its own process, Python clients, each its own "
        f"connection. Both sides run {STORE_CLIENTS_PER_PROCESS} client "
        "threads per process (Python's GIL needs it for TCPStore), all "
        "started together; both on loopback, and 64 clients share the same "
        "2 cores as the server. set-then-get: TCPStore's set does not wait "
        "for an answer, so a set is timed with the get that follows it. "
        "wait: TCPStore's `wait` on a key that exists; the agent's "
        "blocking get (timeout 30 s) of a key that exists. The target of "
        "every row is TCPStore's median in the same run; where the agent's "
        "store spends its time: [store-profile.md](store-profile.md). "
        "**CPU per operation** (µs; the client processes' and the store "
        "process's CPU over each 1 s round, /proc, divided by the "
        "operations timed in it; median of the rounds): with 64 clients "
        "the 2 cores are busy for the whole round on both sides, so "
        "throughput there is 2 cores over the CPU an operation costs, "
        "client and store together.\n\n" + store_cpu_table(cpu))
    return results


def store_cpu_table(cpu):
    """The bench_store note's table: client and store CPU per operation."""
    lines = ["| operation | clients | agent: client | agent: store | "
             "agent: both | TCPStore: client | TCPStore: server | "
             "TCPStore: both |", "|---|---|---|---|---|---|---|---|"]
    for clients in STORE_CLIENTS:
        for op in STORE_OPS:
            cells = []
            for side in ("distjob-agent", "torchrun"):
                rounds = cpu.get((op, clients, side), [])
                per = [(c / max(n, 1) * 1e6, s / max(n, 1) * 1e6)
                       for c, s, n in rounds]
                if not per:
                    cells += ["—"] * 3
                    continue
                c = statistics.median(x for x, _ in per)
                s = statistics.median(y for _, y in per)
                cells += [f"{c:.0f}", f"{s:.0f}", f"{c + s:.0f}"]
            lines.append(f"| {STORE_OP_NAMES.get(op, op)} | {clients} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_ns(pid):
    """CPU time of every thread of `pid` in ns (schedstat: the clock-tick
    counters of /proc/PID/stat read 0 for an idle agent)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
    return total


def bench_metrics(reps, idle_s=3.0, launches=10):
    """The cost of --metrics-port: launch overhead (as bench_launch) and an
    idle agent's CPU over `idle_s` while a scraper reads /metrics once a
    second, each with metrics off and on, alternating. The machine may be
    shared: the note records its load average around the run."""
    import signal
    import urllib.request
    launch = {"off": [], "on": []}
    launch_cpu = {"off": [], "on": []}
    idle = {"off": [], "on": []}
    load_before = os.getloadavg()
    for _ in range(reps):
        for mode in ("off", "on"):
            port = harness.free_port() if mode == "on" else 0
            base = [AGENT, "run", "--standalone", "--nproc-per-node", "1",
                    "--metrics-port", str(port)]
            # Several launches a repetition: one 7 ms sample per mode is
            # within the noise of a shared machine.
            for _ in range(launches):
                wall, cpu = run_measured_cpu(base + ["--", "/bin/true"])
                launch[mode].append(wall)
                launch_cpu[mode].append(cpu)
            # The worker runs until the agent is stopped, so the window
            # never outlives it however slow the machine is.
            proc = subprocess.Popen(
                base + ["--", "/bin/sh", "-c", "exec sleep 600"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                time.sleep(1.0)  # past start-up: the agent is idle
                before = cpu_ns(proc.pid)
                start = time.monotonic()
                while time.monotonic() - start < idle_s:
                    if mode == "on":
                        urllib.request.urlopen(
                            f"http://127.0.0.1:{port}/metrics",
                            timeout=2).read()
                    time.sleep(1.0)
                used = (cpu_ns(proc.pid) - before) / 1e9
                idle[mode].append(used / (time.monotonic() - start) * 1e6)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=30)
    load_after = os.getloadavg()
    medians = {m: statistics.median(v) for m, v in launch.items()}
    load = (f"1-minute load average {load_before[0]:.1f} before and "
            f"{load_after[0]:.1f} after on {os.cpu_count()} CPUs")
    return [
        {"name": "launch overhead, metrics off (wall)", "unit": "s",
         "samples": {"distjob-agent": launch["off"]}},
        {"name": "launch overhead, metrics on (wall)", "unit": "s",
         "samples": {"distjob-agent": launch["on"]},
         "target": {"distjob-agent": medians["off"] + 0.001},
         "note": f"{reps} repetitions of {launches} launches per mode, "
                 "alternating off and on (`--standalone --nproc-per-node 1 "
                 "-- /bin/true`; on: `--metrics-port` serving through "
                 "evhttp); target: at most 1 ms over the metrics-off "
                 f"median. Machine: {load}."},
        {"name": "launch CPU, metrics off (user+system)", "unit": "s",
         "samples": {"distjob-agent": launch_cpu["off"]}},
        {"name": "launch CPU, metrics on (user+system)", "unit": "s",
         "samples": {"distjob-agent": launch_cpu["on"]},
         "target": {"distjob-agent":
                    statistics.median(launch_cpu["off"]) + 0.001},
         "note": "The same launches' CPU time (getrusage of the agent and "
                 "its /bin/true worker): what metrics cost a launch, "
                 "without the waiting for a CPU that the wall time of a "
                 "loaded machine adds. Target: at most 1 ms over the "
                 "metrics-off median."},
        {"name": "idle agent CPU, metrics off", "unit": "µs/s",
         "samples": {"distjob-agent": idle["off"]}},
        {"name": "idle agent CPU, metrics on (1 scrape/s)", "unit": "µs/s",
         "samples": {"distjob-agent": idle["on"]},
         "note": f"CPU of every agent thread (/proc schedstat) over "
                 f"{idle_s:.0f} s of a running job, {reps} repetitions per "
                 "mode; on: one GET /metrics a second. Machine: "
                 f"{load}."},
    ]


SCALE_N = [1, 4, 16, 64, 256, 1024, 4096, 16384]
# The largest N is measured this many times (median of 3 against its
# target); the smaller ones once.
SCALE_TARGET_N = 16384
SCALE_TARGET_REPS = 3
SCALE_HB_SECONDS = 3.0
# The sweep's nodes renew every second (a heartbeat load 5x the default's);
# the target size is also run with the agent's default interval.
SCALE_KEEP_ALIVE_S = 1.0
SCALE_DEFAULT_KEEP_ALIVE_S = 5.0
SCALE_CAP_S = 120.0  # a larger N is not tried once one takes longer


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sims_join(n, endpoint, run_id, store_pid, nproc, cap_s, extra=(),
              around_join=None):
    """N simulated nodes in up to `nproc` store_bench scale processes
    against `endpoint` form one round, then count a steady state's
    requests; the store's CPU is read from `store_pid`. Returns None past
    cap_s (None: no cap), else (reports, join CPU s, steady requests,
    steady store CPU s). `extra`: the scale mode's arguments after
    HB_SECONDS. around_join(store_pid) may return a context manager held
    while the nodes join (bench/profile_scale.py profiles the store with
    it)."""
    procs = []
    try:
        nproc = min(nproc, n)
        per = [n // nproc + (1 if i < n % nproc else 0)
               for i in range(nproc)]
        first = 0
        for count in per:
            procs.append(subprocess.Popen(
                [STORE_BENCH, "scale", endpoint, run_id, str(n), str(first),
                 str(count), str(SCALE_HB_SECONDS), *extra],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            first += count
        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        held = (around_join(store_pid) if around_join
                else contextlib.nullcontext())
        with held:
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            cpu_go = cpu_seconds(store_pid)
            reports = []
            deadline = time.monotonic() + (cap_s or 1e9)
            for p in procs:
                ready, _, _ = select.select(
                    [p.stdout], [], [],
                    max(0, deadline - time.monotonic()))
                if not ready:
                    return None
                reports.append(json.loads(p.stdout.readline()))
            join_cpu = cpu_seconds(store_pid) - cpu_go
        # Steady state: the clients count requests from 0.5 s after
        # their last node joined; sample the store's CPU alike.
        time.sleep(0.5)
        cpu0 = cpu_seconds(store_pid)
        time.sleep(SCALE_HB_SECONDS)
        steady_cpu = cpu_seconds(store_pid) - cpu0
        steady = sum(json.loads(p.stdout.readline())["steady_requests"]
                     for p in procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    if any(r["joined"] == 0 for r in reports):
        raise RuntimeError(f"{endpoint} scale {n}: a process joined nothing")
    return reports, join_cpu, steady, steady_cpu


def scale_once(n, cap_s=None, around_join=None, keep_alive_s=1.0):
    """One scale measurement: a store_bench server and N simulated nodes in
    up to 8 store_bench scale processes, each node renewing its lease every
    keep_alive_s seconds: sims_join's answer."""
    server, port = start_server([STORE_BENCH, "server", str(n)])
    try:
        return sims_join(n, f"127.0.0.1:{port}", f"scale{n}", server.pid, 8,
                         cap_s, [str(keep_alive_s)], around_join)
    finally:
        stop_server(server)


def bench_scale(reps):
    """Scale: one store, N simulated nodes (real DynamicRendezvous join in
    up to 8 store_bench processes) form one round; time to close it, then
    steady-state heartbeat load: requests/s and the store's CPU."""
    reps = 1  # agent only: one pass over N, SCALE_TARGET_REPS at the top
    close, rps, cpu, join_req, join_cpus = {}, {}, {}, {}, {}
    capped = None
    # The agent's default keep-alive first: its rows do not depend on how
    # far the sweep got.
    default_close, default_req, default_cpu, default_busy = [], [], [], []
    for _ in range(SCALE_TARGET_REPS):
        measured = scale_once(SCALE_TARGET_N, SCALE_CAP_S,
                              keep_alive_s=SCALE_DEFAULT_KEEP_ALIVE_S)
        if measured is None:
            default_close.append(float("inf"))
            break
        reports = measured[0]
        default_close.append((max(r["done_ns"] for r in reports) -
                              min(r["start_ns"] for r in reports)) / 1e9)
        requests = sum(r["join_requests"] for r in reports)
        default_req.append(requests / SCALE_TARGET_N)
        # CPU per request of the join: the simulated nodes' processes
        # (cpu_ns, from the go signal) and the store's.
        default_cpu.append(
            (sum(r["cpu_ns"] for r in reports) / 1e3 / requests,
             measured[1] * 1e6 / requests))
        # Both over the join, as a share of all the machine's CPUs.
        default_busy.append(
            (sum(r["cpu_ns"] for r in reports) / 1e9 + measured[1]) /
            (default_close[-1] * os.cpu_count()))
    for _ in range(reps):
        for n in [m for m in SCALE_N for _ in range(
                SCALE_TARGET_REPS if m == SCALE_TARGET_N else 1)]:
            if capped is not None and n >= capped:
                break
            measured = scale_once(n, SCALE_CAP_S,
                                  keep_alive_s=SCALE_KEEP_ALIVE_S)
            if measured is None:
                capped = n
                break
            reports, join_cpu, steady, server_cpu = measured
            start = min(r["start_ns"] for r in reports)
            end = max(r["done_ns"] for r in reports)
            close.setdefault(str(n), []).append((end - start) / 1e9)
            rps.setdefault(str(n), []).append(steady / SCALE_HB_SECONDS)
            join_req.setdefault(str(n), []).append(
                sum(r["join_requests"] for r in reports) / n)
            join_cpus.setdefault(str(n), []).append(join_cpu)
            cpu.setdefault(str(n), []).append(
                100 * server_cpu / SCALE_HB_SECONDS)
    results = [
        {"name": "scale: time to close one round", "unit": "s",
         "series": {"distjob-agent": close}, "plot": "scale_close",
         "xlabel": "simulated nodes", "samples": {}},
        {"name": "scale: steady-state store requests/s", "unit": "req/s",
         "series": {"distjob-agent": rps}, "plot": "scale_requests",
         "xlabel": "simulated nodes", "samples": {}},
        {"name": "scale: steady-state store CPU", "unit": "% of a core",
         "series": {"distjob-agent": cpu}, "plot": "scale_cpu",
         "xlabel": "simulated nodes", "samples": {}},
        {"name": "scale: store requests per node to join", "unit": "req",
         "series": {"distjob-agent": join_req}, "plot": "scale_join_requests",
         "xlabel": "simulated nodes", "samples": {}},
    ]
    lines = ["| nodes | close round | join requests / node | store CPU "
             "during join | steady req/s | steady store CPU |",
             "|---|---|---|---|---|---|"]
    med = statistics.median
    def spread(xs):
        return (f" ({fmt(min(xs), 's')}–{fmt(max(xs), 's')})"
                if len(xs) > 1 else "")
    for n in SCALE_N:
        if str(n) not in close:
            continue
        lines.append(
            f"| {n} | {fmt(med(close[str(n)]), 's')}"
            f"{spread(close[str(n)])} | "
            f"{med(join_req[str(n)]):.0f} | "
            f"{med(join_cpus[str(n)]):.2f} s | "
            f"{med(rps[str(n)]):,.0f} | {med(cpu[str(n)]):.0f} % |")
    if capped is not None:
        lines.append(f"| {capped} | > {SCALE_CAP_S:.0f} s (stopped) | | | "
                     "| |")
    targeted = (4096, SCALE_TARGET_N)
    for n in SCALE_N:
        if str(n) not in close:
            if n in targeted:
                results.append({
                    "name": f"scale: close a round of {n} simulated nodes",
                    "unit": "s", "samples": {"distjob-agent": [
                        float("inf")]},
                    "target": {"distjob-agent": 5.0}})
            continue
        results.append({
            "name": f"scale: close a round of {n} simulated nodes",
            "unit": "s", "samples": {"distjob-agent": close[str(n)]},
            "target": {"distjob-agent": 5.0} if n in targeted else {}})
    results.append({
        "name": f"scale: close a round of {SCALE_TARGET_N} simulated nodes, "
                f"keep_alive_interval={SCALE_DEFAULT_KEEP_ALIVE_S:.0f} "
                "(the default)",
        "unit": "s", "samples": {"distjob-agent": default_close},
        "target": {"distjob-agent": 5.0},
        "note": (
            f"As the row above, with the agent's (and torchrun's) default "
            f"keep_alive_interval of {SCALE_DEFAULT_KEEP_ALIVE_S:.0f} s "
            "instead of 1 s: the load a job of this size puts on its store "
            "as users run it. Store requests per node to join: "
            + ", ".join(f"{x:.1f}" for x in default_req) + " (one run each). "
            "The simulated nodes' and the store's CPU per request during "
            "the join (`store_bench scale` reports its process CPU as "
            "`cpu_ns`), per run: "
            + ", ".join(f"{a:.0f} µs against {b:.0f} µs"
                        for a, b in default_cpu)
            + f"; together they kept the machine's {os.cpu_count()} CPUs "
            + ", ".join(f"{b:.0%}" for b in default_busy)
            + " busy over the join.")})
    results[-2]["note"] = (
        "One `store_bench server` (the agent's store alone in a process); "
        "N simulated nodes, each a real `DynamicRendezvous` (the agent's "
        "join, heartbeat and watch code) over 8 gRPC channels per process, "
        "spread over up to 8 `store_bench scale` processes, "
        "`--nnodes N:N`, `keep_alive_interval=1`. The store and the "
        "simulated nodes share the machine's cores. "
        "Since 2026-11-27 the nodes run in 8 processes instead of 4 "
        "(2,048 threads each at 16,384 nodes: 6.0 s against 7.0 s in one "
        "pair of runs at keep_alive_interval=5, 9.9 s with 2 processes, "
        "6.4–6.7 s with 16 or 32), and a new node's first lease goes with "
        "its join in one request (`LeaseThenAddRecord`): 5 requests per "
        "node to join at keep_alive_interval=5 where there were 6 (the "
        "state, the join with the lease, the wait told of the close, the "
        "rank and master records; the fifth is the monitor's first watch, "
        "counted while it is parked). Later on 2026-11-27 a new node's "
        "first read of the round goes with that join (`AddRecordThenList`: "
        "every node of a new job joins round 0, so its place there and its "
        "read of `ctl/state` are one request): 4 requests per node; and "
        "each simulator process asks the kernel for a futex hash sized for "
        "its threads (Linux 6.16+ gives a threaded process 16 buckets on "
        "this 2-CPU machine whatever its thread count; futex_wake, walking "
        "a bucket's chain of parked node threads, was ~15 % of the "
        "simulated nodes' CPU; a simulator-only cost). "
        "Since 2026-11-23 each node's thread is started before the go "
        "signal (a simulator-only change: creating thousands of threads "
        "after it was part of the timed join). The simulated nodes use "
        "the agent's blocking gRPC client, one thread blocked per call; "
        "they spend ~3.5x the store's CPU (~100 µs per request against "
        "~30 µs, measured under load: "
        "[store-profile.md](store-profile.md#the-simulated-nodes-client-scale-benchmark)); "
        "`bench/profile_scale.py N --clients` profiles them. "
        "Since 2026-11-23 each channel is a connection of its own (gRPC "
        "had pooled a process's 8 channels into one connection), and the "
        "store's per-address cap on parked waits (`max_waiters_per_peer`, "
        "8192) is raised to its store-wide `max_waiters`: every simulated "
        "node calls from 127.0.0.1, and the cap refused half the waits of "
        "a 16,384-node round (each refused node retried after a pause; the "
        "earlier \"> 120 s\" row), which real nodes, each from an address "
        "of its own, never meet. The store runs the completion queues the "
        "agent gives a job of N nodes (one per 2048 nodes, at most 4: "
        "`rendezvous/host_store_limits.h`). "
        f"{SCALE_TARGET_N} nodes: median of {SCALE_TARGET_REPS} runs "
        "(min–max in the table), the others one run. "
        "Timed from the go signal "
        "to the last node holding the round; then requests/s and the "
        f"store process's CPU (/proc utime+stime) over {SCALE_HB_SECONDS:.0f} s "
        "of steady state. Per-node leases make the heartbeat load O(N); "
        "torchrun 1.13's c10d rendezvous instead rewrites the whole O(N) "
        "state blob with compare-set on every heartbeat, O(N²) bytes per "
        "interval (not run here: N Python agents do not fit). Forming a "
        "round costs each node O(1) store requests and bytes: a counter "
        "and a join record of its own; the closed state is a few numbers, "
        "and each node reads only its own rank record. Since issue 18 the "
        "watch that wakes a joiner at the close names the state it was "
        "closed with, so the joiner no longer lists it again: 8 requests "
        "per node from 16 to 1,024 nodes where the quiet run before had 9 "
        "(at 4,096 nodes, old and new alternating under heavy load: 9.6 "
        "then 8.8). Where the store's "
        "time goes: `bench/profile_scale.py 4096` and "
        f"`bench/profile_scale.py {SCALE_TARGET_N}`, committed as "
        "[profile-scale-4096.txt](profile-scale-4096.txt) and "
        f"[profile-scale-{SCALE_TARGET_N}.txt]"
        f"(profile-scale-{SCALE_TARGET_N}.txt).\n\n"
        + "\n".join(lines))
    return results


RECOVER_N = [1024, 4096]
RECOVER_KEEP_ALIVE_S = 1.0
RECOVER_MAX_ATTEMPT = 3  # keep_alive_max_attempt: the lease is 3 intervals
RECOVER_LEASE_S = RECOVER_KEEP_ALIVE_S * RECOVER_MAX_ATTEMPT
# The agent's default keep_alive_interval (rdzv_config), as users run it.
RECOVER_DEFAULT_KEEP_ALIVE_S = 5.0
RECOVER_LAST_CALL_S = 1.0
RECOVER_CAP_S = 90.0
# Written from bench/recover_timeline.py's runs (not measured by the sweep).
RECOVER_TIMELINE = (
    ' **Timeline** of one 4,096-node *node lost* run (`bench/recover_timeli'
    'ne.py 4096`, seconds from the kill, two runs under load): the member b'
    'efore the killed node saw its lease gone and opened the next round at '
    '2.8–4.7 s: the lease runs 3 s from the last renewal (up to 1 s before '
    "the kill), then 0.3–1.4 s more because the expiry wakes every member's"
    ' monitor (all watch `ctl/`) and each reads the state and its next memb'
    "er's lease, 8,190 requests queued around the one that matters; the sur"
    'vivors were told over the next 0.9–1.4 s (each monitor reads the state'
    ' again when the round opens); all had joined 1.1–1.3 s after the first'
    ' (state, counter, record: 3 requests each, the lease renewal `Next` us'
    'ed to make first dropped when the lease was renewed within the interva'
    'l); the last call began with the last joiner (min = N-1), the round cl'
    'osed 1.4–1.8 s later (1 s last call, then 4,095 join records read and '
    'rank records written); every survivor held it 1.2–1.3 s after the clos'
    'e (state, own rank record, master record, waiting nodes: 4 requests ea'
    'ch). At roughly 10,000 requests/s on the 2 shared cores, the ~12 reque'
    'sts per survivor are the ~5 s beyond lease + last call. That timeline'
    ' is from before issue 18\'s fix of the herd: a member\'s monitor now w'
    "atches (`WatchAny`, one parked call) only the round's state, the waiti"
    "ng nodes and its next member's lease, so the expiry wakes the one memb"
    "er that acts; the store's answer names the key that changed with its v"
    'alue, so the survivors told of the new round, and woken by its close, '
    'read no state; the monitor watches from the revision the round closed '
    'at, so no member lists the waiting nodes after the close; a waiting no'
    'de withdraws its ask when it joins, not after the close (which woke ev'
    'ery monitor). Store requests per survivor (`requests` in the replies, '
    'lease renewals left out, watch timeouts included), old and new `store_'
    'bench` alternating under heavy load (1-minute load average 40–300 on 2'
    ' cores, one run each, times not comparable): node lost 15.0 → 8.0 at 1'
    ',024 nodes, 12.2–12.6 → 7.8–10.2 at 4,096; waiting node 16.4 → 10.0 '
    'at 1,024, 12.9–13.1 → 11.6–16.5 at 4,096 (a slow last joiner under th'
    'at load miss'
    'es the 1 s last call and costs a second round). The earlier rows of t'
    'his table were also distorted by the simulator: 8 heartbeat threads pe'
    'r process renewed 128 leases each one after another, a pass outlasted '
    'the 3 s lease under load, and hundreds of live nodes were seen lost (o'
    "ne such false loss opened the round before the killed node's lease ran"
    ' out); it now renews from a thread per 16 nodes. By method (`by_meth'
    "od` in `store_bench recover`'s kill reply; one quiet 4,096-node run, p"
    'er survivor): the monitor watch timed out and re-armed 2.0 times while'
    " the lost lease ran out, then was told of the new round (1.0); joining"
    ' took the counter (1.0) and the join record (1.0), the wait was told o'
    'f the close (1.0), then the rank record (1.0) and the master record (1'
    ".0): 8.0. The monitor's watch now lasts a lease (it re-armed every ke"
    "ep-alive interval; what ends the round answers it anyway): 7.0 per sur"
    'vivor at 4,096 nodes and 6.0 at 1,024 (8.5 and 8.0 before, quiet runs)'
    ', but those re-arms fell while the store idles for the lease, so the t'
    'ime did not move (6.14 s at 4,096 after, 6.00 s before, quiet runs'
    '): the critical path was then the join (2 requests per survivor) and '
    'after the close (3), ~1 s each at ~10,000 requests/s. Since then a joi'
    'ner takes its place and writes its record in one request (`AddThenRec'
    "ord`), and a member other than rank 0 reads its rank record and the ma"
    "ster's in one (the closed state names rank 0): 4.0 requests per surviv"
    'or. One quiet 4,096-node run of `bench/recover_timeline.py` after that'
    ' (5.81 s; the kill fell late in a renewal interval): survivors told at'
    ' 3.44–3.72 s, all joined by 4.10 s, the last call 4.10–5.10 s, the rou'
    'nd closed at 5.36 s and every survivor held it at 5.76–5.81 s: 2.4 s f'
    'rom the expiry to the last survivor, of which 1 s is the last call. '
    'Since 2026-11-27 the node whose join begins the last call writes the '
    "round's members and rank records while the call runs, and closes it "
    'when the call ends with the join count and the compare-set; and the '
    'kill is timed from when the node\'s renewals stop (the stamp had been '
    "taken before its shard's renewing pass, which could renew it once "
    'more, so the lease ran out up to ~0.4 s more than a lease after it). '
    'Five quiet runs of `bench/recover_timeline.py 4096` then: survivors '
    'told at 2.65–3.09 s (the lease, then the member before the lost one '
    'opening the round) and joined within 0.4–0.5 s, the last call 1 s, '
    'and every survivor held the round 0.3–0.5 s after it ended (the '
    "compare-set's answer comes behind 4,095 answers to the waits, then "
    '4,095 reads of the rank and master records): 1.9–2.1 s from the first '
    "survivor told. At the default keep-alive (`recover_timeline.py 4096 "
    "5`, three runs) 1.8–2.0 s, the first told at ~14 s.")


def recover_once(n, log_dir=None, keep_alive_s=RECOVER_KEEP_ALIVE_S):
    """One recovery measurement: N simulated nodes (`--nnodes N-1:N`) form
    a round; node N/2's lease stops (a crash); then a new node asks to
    join the survivors' round. Returns (seconds from the kill to the last
    survivor holding the next round, seconds from the new node's start to
    the last member holding the round that takes it in, store requests
    per survivor in the first and per member in the second, lease renewals
    left out), or None past RECOVER_CAP_S at any step. With `log_dir`, the simulated nodes' debug
    log goes to sim-<i>.log there and the kill phase's replies to
    kill.json (bench/recover_timeline.py reads them)."""
    server, port = start_server([STORE_BENCH, "server", str(n)])
    procs = []
    try:
        nproc = min(8, n)
        per = [n // nproc + (1 if i < n % nproc else 0)
               for i in range(nproc)]
        first = 0
        env = None
        if log_dir is not None:
            env = dict(os.environ, STORE_BENCH_LOG="debug")
        for i, count in enumerate(per):
            err = None
            if log_dir is not None:
                err = open(os.path.join(log_dir, f"sim-{i}.log"), "w")
            procs.append(subprocess.Popen(
                [STORE_BENCH, "recover", f"127.0.0.1:{port}", f"recover{n}",
                 str(n), str(first), str(count), str(n - 1),
                 str(RECOVER_LAST_CALL_S), str(keep_alive_s)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                env=env, text=True))
            if err is not None:
                err.close()
            first += count

        def tell(line):
            for p in procs:
                p.stdin.write(line + "\n")
                p.stdin.flush()

        def replies():
            out = []
            deadline = time.monotonic() + RECOVER_CAP_S
            for p in procs:
                ready, _, _ = select.select(
                    [p.stdout], [], [], max(0, deadline - time.monotonic()))
                if not ready:
                    return None
                out.append(json.loads(p.stdout.readline()))
            return out

        for p in procs:
            assert p.stdout.readline().strip() == "ready"
        tell("go")
        formed = replies()
        if formed is None or sum(r["joined"] for r in formed) != n:
            return None
        tell(f"kill {n // 2}")
        recovered = replies()
        if (recovered is None or
                sum(r["joined"] for r in recovered) != n - 1):
            return None
        kill = max(r["kill_ns"] for r in recovered)
        loss = (max(r["done_ns"] for r in recovered) - kill) / 1e9
        loss_req = sum(r.get("requests", 0) for r in recovered) / (n - 1)
        if log_dir is not None:
            with open(os.path.join(log_dir, "kill.json"), "w") as f:
                json.dump(recovered, f)
        tell(f"join {n}")  # a new node: sim<n>, in the first process
        grown = replies()
        if grown is None or sum(r["joined"] for r in grown) != n:
            return None
        start = max(r["join_ns"] for r in grown)
        join = (max(r["done_ns"] for r in grown) - start) / 1e9
        join_req = sum(r.get("requests", 0) for r in grown) / n
        return loss, join, loss_req, join_req
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        stop_server(server)


def bench_recover(reps):
    """Recovery at scale: a crashed node's survivors, and a new node
    joining a running job, each to the next closed round; at a 1 s
    keep-alive interval (a 3 s lease) and at the agent's default (5 s)."""
    reps = max(1, min(reps, 3))
    keep_alives = [RECOVER_KEEP_ALIVE_S, RECOVER_DEFAULT_KEEP_ALIVE_S]
    runs = [(n, k) for k in keep_alives for n in RECOVER_N]
    loss, join, loss_req, join_req = {}, {}, {}, {}
    failed = {run: 0 for run in runs}
    load_before = os.getloadavg()
    for _ in range(reps):
        for n, k in runs:
            measured = recover_once(n, keep_alive_s=k)
            if measured is None:
                failed[(n, k)] += 1
                continue
            loss.setdefault((n, k), []).append(measured[0])
            join.setdefault((n, k), []).append(measured[1])
            loss_req.setdefault((n, k), []).append(measured[2])
            join_req.setdefault((n, k), []).append(measured[3])
    for run in runs:  # no run within the cap: shown as infinite
        loss.setdefault(run, [float("inf")])
        join.setdefault(run, [float("inf")])

    def target(k):
        return k * RECOVER_MAX_ATTEMPT + RECOVER_LAST_CALL_S + 1.0

    def suffix(k):
        if k == RECOVER_KEEP_ALIVE_S:
            return ""
        return f", keep_alive_interval={k:.0f} (the default)"

    results = []
    for n, k in runs:
        results.append({
            "name": f"recovery: node lost to next round, {n} simulated nodes"
                    + suffix(k),
            "unit": "s", "samples": {"distjob-agent": loss[(n, k)]},
            "target": {"distjob-agent": target(k)}})
        results.append({
            "name": f"recovery: waiting node to next round, {n} simulated "
                    "nodes" + suffix(k),
            "unit": "s", "samples": {"distjob-agent": join[(n, k)]},
            "target": {"distjob-agent": target(k)}})
    # After the note's row: the note stays on the last timed row.
    req_rows = []
    for n, k in runs:
        if (n, k) not in loss_req:
            continue
        req_rows.append({
            "name": f"recovery: store requests per survivor, node lost, {n} "
                    "simulated nodes" + suffix(k),
            "unit": "req", "samples": {"distjob-agent": loss_req[(n, k)]}})
        req_rows.append({
            "name": f"recovery: store requests per node, waiting node, {n} "
                    "simulated nodes" + suffix(k),
            "unit": "req", "samples": {"distjob-agent": join_req[(n, k)]}})
    results[-1]["note"] = (
        "`store_bench recover`: one `store_bench server`; N simulated nodes "
        "(real `DynamicRendezvous`, as in the scale rows: 8 connections "
        "per process, the per-address cap on parked waits raised) in up "
        "to 8 processes, `--nnodes N-1:N`, "
        f"`keep_alive_interval={RECOVER_KEEP_ALIVE_S:.0f}`, "
        f"`keep_alive_max_attempt={RECOVER_MAX_ATTEMPT}` (a "
        f"{RECOVER_LEASE_S:.0f} s lease), `last_call_timeout="
        f"{RECOVER_LAST_CALL_S:.0f}`; the rows marked *the default* at the "
        "agent's default `keep_alive_interval="
        f"{RECOVER_DEFAULT_KEEP_ALIVE_S:.0f}` (a "
        f"{RECOVER_DEFAULT_KEEP_ALIVE_S * RECOVER_MAX_ATTEMPT:.0f} s lease, "
        "each node's renewals a fifth as many). *Node lost*: node N/2 stops "
        "renewing its lease (a crash: no word to the store); timed from "
        "then to the last survivor holding the next closed round (N-1 "
        "members: its lease runs out, the member before it in rank order "
        "opens the next round, the survivors join it and the last call "
        "closes it). *Waiting node*: then a new node asks to join the N-1 "
        "survivors' round; timed from its start to the last of the N "
        "holding the round that takes it in (the round fills, so no last "
        "call). Target: lease + last call + 1 s = "
        f"{target(RECOVER_KEEP_ALIVE_S):.0f} s "
        f"({target(RECOVER_DEFAULT_KEEP_ALIVE_S):.0f} s at the default). "
        f"Median of {reps} runs, min–max beside it"
        + "".join(f"; at {n} nodes{suffix(k)} {failed[(n, k)]} of {reps} "
                  f"runs did not finish within {RECOVER_CAP_S:.0f} s"
                  for n, k in runs if failed[(n, k)]) + "."
        + RECOVER_TIMELINE
        + f" 1-minute load average {load_before[0]:.1f} before this "
        f"section and {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} "
        "CPUs.")
    return results + req_rows


# -- worker output through --tee -----------------------------------------------

TEE_MB = 512
# 100-byte lines, written a megabyte at a time, as fast as Python can.
TEE_WORKER = (
    "import sys\n"
    "block = (b'y' * 99 + b'\\n') * 10486\n"
    "out = sys.stdout.buffer\n"
    "for _ in range(%d):\n"
    "    out.write(block)\n" % TEE_MB)


def console_throughput(argv):
    """Runs argv with its stdout a pipe drained by this process (a container
    runtime's console); returns MB/s of worker output over the whole run."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    total = 0
    while True:
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        if not chunk:
            break
        total += len(chunk)
    code = proc.wait(timeout=120)
    wall = time.monotonic() - start
    if code != 0:
        raise RuntimeError(f"{argv} exited {code}")
    return TEE_MB * 1.048576 / wall, total


def bench_tee(reps):
    """Worker output to the console with and without --tee 3 (prefixed
    copies to the console plus files under --log-dir)."""
    samples = {"with --tee 3": [], "without --tee": []}
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    for _ in range(reps):
        with tempfile.TemporaryDirectory(dir=shm) as tmp:
            worker = os.path.join(tmp, "w.py")
            with open(worker, "w") as f:
                f.write(TEE_WORKER)
            base = [AGENT, "run", "--standalone", "--no-python", PYTHON,
                    worker]
            tee = base[:2] + ["--tee", "3", "--log-dir",
                              os.path.join(tmp, "logs")] + base[2:]
            for name, argv in (("with --tee 3", tee),
                               ("without --tee", base)):
                rate, _ = console_throughput(argv)
                samples[name].append(rate)
    return [
        {"name": "worker output to the console with --tee 3", "unit": "MB/s",
         "samples": {"distjob-agent": samples["with --tee 3"]},
         "higher_better": True, "target": {"distjob-agent": 200.0},
         "note": f"{TEE_MB} MB of 100-byte lines from one Python worker to a "
                 "console pipe that the benchmark drains; --log-dir on "
                 "/dev/shm, so the agent is measured and not the disk. Agent "
                 "only. The earlier line-at-a-time copier did about "
                 "37 MB/s here."},
        {"name": "worker output to the console without --tee",
         "unit": "MB/s",
         "samples": {"distjob-agent": samples["without --tee"]},
         "higher_better": True,
         "note": "The same worker writing to the console pipe directly: the "
                 "ceiling --tee is measured against."},
    ]


# -- etcd beside c10d ---------------------------------------------------------

ETCD_RDZV_N = RDZV_AGENT_N
ETCD_SCALE_N = [256, 1024, 4096]
ETCD_SCALE_CAP_S = 45.0  # a larger N is not tried once one takes longer
ETCD_RECOVERY_NODES = 4
ETCDCTL_ENV = dict(os.environ, ETCDCTL_API="3")


def etcd_cluster_module():
    """tests/integration/etcd_cluster.py: the tests' way of starting etcd."""
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    import etcd_cluster
    return etcd_cluster


@contextlib.contextmanager
def etcd_on_loopback(members):
    """Debian's etcd, `members` of one cluster on loopback, data dirs in a
    temporary directory removed afterwards, every member killed."""
    ec = etcd_cluster_module()
    if not os.access(ec.ETCD, os.X_OK):
        raise RuntimeError(f"{ec.ETCD} is missing: apt-get install "
                           "etcd-server etcd-client")
    with tempfile.TemporaryDirectory(prefix="etcd-bench-") as tmp:
        cluster = ec.EtcdCluster(pathlib.Path(tmp), members)
        try:
            cluster.start_all()
            yield cluster
        finally:
            cluster.stop()


def etcd_leader(cluster):
    """Index of the member that leads the cluster now, from `etcdctl
    endpoint status` of every member still running."""
    eps = ",".join(cluster.endpoint(i) for i in cluster.procs)
    r = subprocess.run([etcd_cluster_module().ETCDCTL, "--endpoints", eps,
                        "--dial-timeout=1s", "--command-timeout=2s",
                        "endpoint", "status", "-w", "json"],
                       capture_output=True, text=True, env=ETCDCTL_ENV,
                       timeout=30, check=True)
    for st in json.loads(r.stdout):
        if st["Status"]["header"]["member_id"] == st["Status"]["leader"]:
            port = int(st["Endpoint"].rsplit(":", 1)[1])
            return cluster.client_ports.index(port)
    raise RuntimeError(f"etcd {eps}: no leader in {r.stdout}")


def sim_scale_once(n, endpoint, store_pid, run_id, cap_s):
    """N simulated nodes (store_bench scale, up to 4 processes) against
    `endpoint` (the embedded store, or etcd:HOST:PORT); the store's CPU is
    read from `store_pid`. None past cap_s, else (close s, join CPU s,
    steady requests/s, steady store CPU % of a core)."""
    measured = sims_join(n, endpoint, run_id, store_pid, 4, cap_s)
    if measured is None:
        return None
    reports, join_cpu, steady, steady_cpu = measured
    close = (max(r["done_ns"] for r in reports) -
             min(r["start_ns"] for r in reports)) / 1e9
    return (close, join_cpu, steady / SCALE_HB_SECONDS,
            100 * steady_cpu / SCALE_HB_SECONDS)


def etcd_recovery_once(kill, tag, n=ETCD_RECOVERY_NODES):
    """A 3-member etcd cluster; n-1 agents of an n-node round have joined;
    with `kill`, SIGKILL the etcd leader (listed first in every agent's
    --rdzv-endpoint, so each agent's connection is the one lost); then the
    n-th agent starts. Returns (seconds from the kill, or the moment it
    would be, to the last worker's first instruction; every agent exited
    0 after the workers were released)."""
    with etcd_on_loopback(3) as cluster, \
            tempfile.TemporaryDirectory() as tmp:
        leader = etcd_leader(cluster)
        order = [leader] + [i for i in range(3) if i != leader]
        rid = f"recovery-{tag}"
        job = Nodes("distjob-agent", tmp, n, backend="etcd", hold=True,
                    endpoint=",".join(cluster.endpoint(i) for i in order),
                    rdzv_id=rid, conf="join_timeout=120")
        try:
            for i in range(n - 1):
                job.start(i)
            joins = f"/distjob/{rid}/kv/rdzv/{rid}/join/"
            wait_for(lambda: len(cluster.keys(joins)) >= n - 1, 120,
                     f"{n - 1} etcd join records under {joins}")
            t0 = time.monotonic_ns()
            if kill:
                cluster.kill(etcd_leader(cluster))
            job.start(n - 1)
            last = wait_for(lambda: job.first_start_after(range(n), 0), 120,
                            f"etcd round of {n} after the leader's loss")
            try:
                job.finish(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            completed = all(p.returncode == 0 for p in job.procs.values())
            if not completed:
                keep = pathlib.Path(tempfile.gettempdir(),
                                    f"etcd-bench-{rid}")
                shutil.copytree(tmp, keep, dirs_exist_ok=True)
                print(f"etcd recovery {rid}: not every agent exited 0; "
                      f"logs in {keep}", flush=True)
        finally:
            job.cleanup()
    return (last - t0) / 1e9, completed


def bench_etcd(reps):
    """The etcd backend beside c10d (the agent's embedded store), same run:
    rendezvous latency of 2–64 real agents, simulated-node scale at 256,
    1,024 and 4,096 against one etcd on loopback, and a round finishing
    after the etcd leader of a 3-member cluster is killed."""
    reps = max(1, min(reps, 2))
    load_before = os.getloadavg()
    lat = {"c10d": {}, "etcd": {}}
    with etcd_on_loopback(1) as cluster:
        for rep in range(reps):
            for n in ETCD_RDZV_N:
                lat["c10d"].setdefault(str(n), []).append(
                    rdzv_once("distjob-agent", n))
                lat["etcd"].setdefault(str(n), []).append(
                    rdzv_once("distjob-agent", n, backend="etcd",
                              endpoint=cluster.endpoints,
                              rdzv_id=f"lat-{rep}-{n}"))
    scale = {"c10d": {}, "etcd": {}}
    capped = {}
    for n in ETCD_SCALE_N:
        for backend in ("c10d", "etcd"):
            if backend in capped:
                continue
            if backend == "etcd":
                with etcd_on_loopback(1) as cluster:
                    got = sim_scale_once(
                        n, "etcd:" + cluster.endpoints,
                        cluster.procs[0].pid, f"scale{n}", ETCD_SCALE_CAP_S)
            else:
                server, port = start_server([STORE_BENCH, "server"])
                try:
                    got = sim_scale_once(n, f"127.0.0.1:{port}", server.pid,
                                         f"scale{n}", ETCD_SCALE_CAP_S)
                finally:
                    stop_server(server)
            if got is None:
                capped[backend] = n
            else:
                scale[backend][str(n)] = got
    recovery = {"leader killed": [], "no kill": []}
    completed = []
    for rep in range(max(2, reps)):
        for variant in recovery:
            took, ok = etcd_recovery_once(variant == "leader killed",
                                          f"{rep}-{len(completed)}")
            recovery[variant].append(took)
            completed.append(ok)
    load_after = os.getloadavg()
    return etcd_results(reps, lat, scale, capped, recovery, completed,
                        load_before, load_after)


def etcd_results(reps, lat, scale, capped, recovery, completed, load_before,
                 load_after):
    med = statistics.median

    def span(xs, unit="s"):
        return (f"{fmt(med(xs), unit)} ({fmt(min(xs), unit)}–"
                f"{fmt(max(xs), unit)})")

    results = [{"name": "etcd beside c10d: rendezvous latency vs N",
                "unit": "s", "series": lat, "plot": "etcd_rendezvous",
                "xlabel": "nodes (--nnodes N, loopback)", "samples": {}}]
    lines = ["| nodes | c10d (embedded store) | etcd (1 member) | etcd / "
             "c10d |", "|---|---|---|---|"]
    for n in ETCD_RDZV_N:
        c, e = lat["c10d"][str(n)], lat["etcd"][str(n)]
        lines.append(f"| {n} | {span(c)} | {span(e)} | "
                     f"{med(e) / med(c):.1f}× |")
        for backend, xs in (("etcd", e), ("c10d", c)):
            results.append({
                "name": f"etcd beside c10d: rendezvous, {n} nodes, "
                        f"{backend}", "unit": "s",
                "samples": {"distjob-agent": xs}})
    lines += ["", "| simulated nodes | c10d close round | etcd close round "
              "| c10d store CPU during join | etcd CPU during join | c10d "
              "steady req/s, store CPU | etcd steady req/s, etcd CPU |",
              "|---|---|---|---|---|---|---|"]
    for n in ETCD_SCALE_N:
        cells = []
        for backend in ("c10d", "etcd"):
            got = scale[backend].get(str(n))
            if got is None and capped.get(backend, n + 1) <= n:
                cells.append(None)
            else:
                cells.append(got)
        # A row where neither backend was tried; one stopped at n shows.
        if all(got is None and capped.get(backend) != n
               for got, backend in zip(cells, ("c10d", "etcd"))):
            continue

        def cell(got, i, fmt_, backend):
            if got is None:
                if i > 0:
                    return "—"
                if capped.get(backend) == n:
                    return f"> {ETCD_SCALE_CAP_S:.0f} s (stopped)"
                return "not tried"
            return fmt_(got)
        row = [f"| {n} "]
        for i, fmt_ in ((0, lambda g: fmt(g[0], "s")),
                        (1, lambda g: f"{g[1]:.2f} s"),
                        (2, lambda g: f"{g[2]:,.0f}, {g[3]:.0f} %")):
            for got, backend in zip(cells, ("c10d", "etcd")):
                row.append(cell(got, i, fmt_, backend))
        lines.append(" | ".join(row) + " |")
        for backend, got in zip(("etcd", "c10d"), cells[::-1]):
            results.append({
                "name": f"etcd beside c10d: close a round of {n} simulated "
                        f"nodes, {backend}", "unit": "s",
                "samples": {"distjob-agent": [
                    got[0] if got else float("inf")]}})
    kill, calm = recovery["leader killed"], recovery["no kill"]
    results.append({
        "name": f"etcd: round of {ETCD_RECOVERY_NODES} after killing the "
                "etcd leader (3 members)", "unit": "s",
        "samples": {"distjob-agent": kill}})
    results.append({
        "name": f"etcd: same round of {ETCD_RECOVERY_NODES}, no kill "
                "(3 members)", "unit": "s",
        "samples": {"distjob-agent": calm}})
    lines += ["", "| 3-member etcd, round of "
              f"{ETCD_RECOVERY_NODES} | to every agent holding the round | "
              "jobs completed |", "|---|---|---|",
              f"| etcd leader SIGKILLed mid-round | {span(kill)} | "
              f"{sum(completed[0::2])}/{len(kill)} |",
              f"| no kill | {span(calm)} | "
              f"{sum(completed[1::2])}/{len(calm)} |"]
    results[-1]["note"] = (
        f"1-minute load average {load_before[0]:.1f} before this section "
        f"and {load_after[0]:.1f} after, on {os.cpu_count()} CPUs; "
        "`bench/run.sh --only etcd` re-runs this section alone. "
        "Median (min–max). Rendezvous: the same code path as *rendezvous "
        f"latency vs N* ({reps} repetitions, alternating c10d and etcd "
        "per N), c10d with node 0 hosting the embedded store, etcd "
        "against one Debian etcd (3.4) on loopback, data dir in a "
        "temporary directory. Scale: `store_bench scale` (real "
        "`DynamicRendezvous` per simulated node, `keep_alive_interval=1`) "
        "against `store_bench server` (c10d) or a fresh single etcd "
        "through the agent's etcd client; the CPU columns are the store "
        "process's (etcd's own for etcd); the etcd client renews a "
        "client's leases on one long-lived keep-alive stream, puts a key "
        "a heartbeat adds under the lease it renews, and retries a "
        "timed-out attempt with twice the time (5 s up to 40 s). "
        "Recovery: a 3-member cluster, "
        f"{ETCD_RECOVERY_NODES - 1} of {ETCD_RECOVERY_NODES} agents have "
        "joined (their join records are in etcd), the leader, which every "
        "agent lists first in `--rdzv-endpoint` and so is connected to, "
        "is SIGKILLed, then the last agent starts; timed from the kill to "
        "the last worker's first instruction; *jobs completed*: every "
        "agent exited 0 once the workers were released.\n\n"
        + "\n".join(lines))
    return results


BENCHMARKS = {
    "launch": bench_launch,
    "restart": bench_restart_standalone,
    "rdzv": bench_rdzv,
    "restart4": bench_restart_multi,
    "peerloss": bench_peer_loss,
    "recovery": bench_recovery_collectives,
    "store": bench_store,
    "scale": bench_scale,
    "recover": bench_recover,
    "metrics": bench_metrics,
    "tee": bench_tee,
    "worker_store": lambda reps: worker_store_bench.bench_worker_store(
        reps, AGENT, merged_ops),
    "etcd": bench_etcd,
    "worker_store_scale": lambda reps: worker_store_scale.
    bench_worker_store_scale(reps, AGENT),
    "worker_store_allgather": lambda reps: worker_store_allgather.
    bench_worker_store_allgather(reps, AGENT),
    "mpi_start": lambda reps: mpi_start.bench_mpi_start(reps, AGENT, STAMP),
}
# The sections that run store_bench, which links most of the agent: the
# others run without it (bench/run.sh builds it only for these).
NEEDS_STORE_BENCH = {"store", "scale", "recover", "etcd"}


# -- reporting --------------------------------------------------------------

def summarize(result):
    rows = {}
    for launcher, xs in result["samples"].items():
        if not xs:
            continue
        xs = sorted(xs)
        rows[launcher] = {
            "median": statistics.median(xs), "min": xs[0], "max": xs[-1],
            # A run that did not finish is an infinite sample (a cap):
            # the spread is of the finite ones.
            "stdev": statistics.stdev([x for x in xs if math.isfinite(x)])
            if sum(map(math.isfinite, xs)) > 1 else 0.0,
            "n": len(xs)}
    return rows


def fmt(value, unit):
    if unit == "s":
        if value < 0.001:
            return f"{value * 1e6:.0f} µs"
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit in ("ops/s", "req/s"):
        return f"{value:,.0f} {unit}"
    return f"{value:.1f} {unit}"


def took(meta):
    """The sweep's wall time and its sections', when the run noted them."""
    seconds = meta.get("seconds")
    if not seconds:
        return ""
    parts = ", ".join(f"{name} {s} s" for name, s in seconds.items())
    return (f" The run took {sum(seconds.values()) / 60:.1f} minutes "
            f"({parts}).")


def write_markdown(results, meta):
    lines = ["# distjob-agent vs torchrun: results", "",
             f"Measured {meta['date']} on {meta['machine']} by "
             f"`{meta['command']}` (up to {meta['reps']} repetitions per "
             "launcher, alternating; the multi-node, store and scale "
             "benchmarks cap theirs, see docs/bench/README.md). Median (min–max, stdev). Speed-up: torchrun median / agent "
             "median for times, agent / TCPStore for throughput (> 1: the "
             "agent is faster). Store rows: the torchrun column is "
             "PyTorch's TCPStore." + took(meta), "",
             "| benchmark | distjob-agent | torchrun | speed-up | target "
             "(agent) |", "|---|---|---|---|---|"]
    for result in results:
        if "series" in result:
            continue
        s = summarize(result)
        unit = result["unit"]
        cells = []
        for launcher in ["distjob-agent", "torchrun"]:
            if launcher in s:
                r = s[launcher]
                # A row measured against another anchor names it there.
                anchor = result.get("anchor") if launcher == "torchrun" \
                    else None
                cells.append((f"{anchor}: " if anchor else "") +
                             f"{fmt(r['median'], unit)} "
                             f"({fmt(r['min'], unit)}–{fmt(r['max'], unit)}, "
                             f"σ {fmt(r['stdev'], unit)})")
            else:
                cells.append("—")
        ratio = "—"
        if "distjob-agent" in s and "torchrun" in s and \
                s["distjob-agent"]["median"] > 0:
            ratio = s["torchrun"]["median"] / s["distjob-agent"]["median"]
            if result.get("higher_better"):
                ratio = 1 / ratio
            ratio = f"{ratio:.2f}×"
        target = result.get("target", {}).get("distjob-agent")
        verdict = "—"
        if target is not None and "distjob-agent" in s:
            got = s["distjob-agent"]["median"]
            if result.get("higher_better"):
                verdict = f"≥ {fmt(target, unit)}: " + (
                    "met" if got >= target else
                    f"MISSED by {fmt(target - got, unit)}")
            else:
                met = got <= target
                verdict = f"≤ {fmt(target, unit)}: " + (
                    "met" if met else f"MISSED by {fmt(got - target, unit)} "
                    f"({got / target:.1f}×)")
        lines.append(f"| {result['name']} | {cells[0]} | {cells[1]} | "
                     f"{ratio} | {verdict} |")
    lines.append("")
    for result in results:
        if result.get("note"):
            lines += [f"**{result['name']}**: {result['note']}", ""]
    (OUT / "results.md").write_text("\n".join(lines))


def write_plots(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in results if r["unit"] == "s" and "series" not in r
             and not r["name"].startswith(("store", "scale"))
             and "anchor" not in r
             and "torchrun" in r["samples"] and r["samples"]["torchrun"]]
    if timed:
        fig, ax = plt.subplots(figsize=(7, 0.6 + 0.9 * len(timed)))
        labels, agent, torch = [], [], []
        for r in timed:
            s = summarize(r)
            labels.append(r["name"])
            agent.append(s.get("distjob-agent", {}).get("median", 0) * 1000)
            torch.append(s.get("torchrun", {}).get("median", 0) * 1000)
        ys = range(len(labels))
        ax.barh([y + 0.2 for y in ys], torch, 0.4, label="torchrun",
                color="#d62728")
        ax.barh([y - 0.2 for y in ys], agent, 0.4, label="distjob-agent",
                color="#1f77b4")
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels)
        ax.set_xscale("log")
        ax.set_xlabel("median, milliseconds (log scale)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "latency.png", dpi=110)
        plt.close(fig)
    store = [r for r in results if r.get("group") == "store"]
    if store:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        for ax, metric, unit in ((axes[0], "p50 latency", "µs"),
                                 (axes[1], "throughput", "ops/s")):
            rows = [r for r in store if metric in r["name"]]
            labels = [r["name"].split(" (")[0].replace("store ", "")
                      .replace(f" {metric}", "") for r in rows]
            scale = 1e6 if unit == "µs" else 1
            agent = [statistics.median(r["samples"]["distjob-agent"]) * scale
                     for r in rows]
            torch = [statistics.median(r["samples"]["torchrun"]) * scale
                     for r in rows]
            ys = range(len(rows))
            ax.barh([y + 0.2 for y in ys], torch, 0.4, label="TCPStore",
                    color="#d62728")
            ax.barh([y - 0.2 for y in ys], agent, 0.4,
                    label="distjob-agent store", color="#1f77b4")
            ax.set_yticks(list(ys))
            ax.set_yticklabels(labels)
            ax.set_xscale("log")
            ax.set_xlabel(f"{metric}, {unit} (median, log scale)")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(OUT / "store.png", dpi=110)
        plt.close(fig)
    for r in results:
        if "series" not in r:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for launcher, points in r["series"].items():
            xs = sorted(int(n) for n in points)
            ax.plot(xs, [statistics.median(points[str(x)]) for x in xs],
                    marker="o", label=launcher)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(r.get("xlabel", "N"))
        ax.set_ylabel(f"median, {r['unit']}")
        ax.set_title(r["name"])
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / f"{r['plot']}.png", dpi=110)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help="comma-separated subset of: " +
                        ", ".join(BENCHMARKS))
    args = parser.parse_args()
    needed = [AGENT, STAMP]
    if NEEDS_STORE_BENCH & set(args.only.split(",")):
        needed.append(STORE_BENCH)
    for path in needed:
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is not built: run bench/run.sh")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    # Wall seconds per section, for the sweep's own budget (docs/bench/README.md).
    seconds = {}
    for name in args.only.split(","):
        print(f"running {name} ...", flush=True)
        start = time.monotonic()
        results += BENCHMARKS[name](args.reps)
        seconds[name] = round(time.monotonic() - start)
        print(f"{name}: {seconds[name]} s", flush=True)
    meta = {"date": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, "
                       f"Linux {platform.release()}",
            "command": "bench/run.sh " + " ".join(sys.argv[1:]),
            "reps": args.reps, "seconds": seconds}
    names = {r["name"] for r in results}
    previous = OUT / "results.json"
    if set(args.only.split(",")) != set(BENCHMARKS) and previous.exists():
        # A subset updates its own rows and keeps the others' last run.
        old = json.loads(previous.read_text())
        results = [r for r in old["results"] if r["name"] not in names] + \
            results
        for r in results:
            if r["name"] in names:
                r["note"] = (r.get("note", "") + f" (Measured {meta['date']} "
                             f"by `{meta['command']}`, "
                             f"{sum(seconds.values())} s.)").strip()
        meta = old["meta"]
    (OUT / "results.json").write_text(json.dumps(
        {"meta": meta, "results": results}, indent=1))
    write_markdown(results, meta)
    write_plots(results)
    print((OUT / "results.md").read_text())


if __name__ == "__main__":
    main()
