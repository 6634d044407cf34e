"""Helpers for tests of the built agent: locate it, wait for conditions
with a deadline (never a fixed sleep), inspect the process tree, start
agents in the background and find free ports."""

import datetime
import json
import os
import pathlib
import random
import re
import resource
import socket
import subprocess
import textwrap
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The interpreter that has PyTorch: Debian's (python3-torch, 1.13) unless
# DISTJOB_PYTHON names another, as tests/device/check.sh does on a machine
# with PyTorch 2.x.
PYTHON = os.environ.get("DISTJOB_PYTHON", "/usr/bin/python3")


# Unsets every variable through which the job's environment could reach the
# agent (a test's own environment may be a pod's): the start of a test's
# `env=` for run_agent.
CLEAN_JOB_ENV = {
    k: None for k in os.environ
    if k.startswith(("VC_", "VK_", "PET_", "DISTJOB_", "MASTER_",
                     "TORCHELASTIC_"))
    or k in ("TF_CONFIG", "DMLC_ROLE", "WORLD_SIZE", "RANK")}

# A Volcano TensorFlow job as the svc plugin describes it, through VC_*
# only, whose peer names never resolve (.invalid): a job that can only wait.
VOLCANO_TF_UNRESOLVABLE = {
    **CLEAN_JOB_ENV,
    "VC_PS_HOSTS": "tfj-ps-0.tfj.invalid",
    "VC_PS_NUM": "1",
    "VC_WORKER_HOSTS": "tfj-worker-0.tfj.invalid,tfj-worker-1.tfj.invalid",
    "VC_WORKER_NUM": "2",
    "VC_TASK_INDEX": "1",
    "DISTJOB_JOB_NAME": "tfj",
    "DISTJOB_TASK": "worker",
    "DISTJOB_FRAMEWORK": "tensorflow",
    "DISTJOB_DNS_TIMEOUT": "300",
}


def agent_binary():
    return os.environ.get("DISTJOB_AGENT",
                          str(ROOT / "bazel-bin" / "agent" / "distjob-agent"))


def wait_for(condition, timeout, interval=0.01, what="condition"):
    """Polls `condition` until it returns a truthy value or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def holds_for(condition, window, interval=0.05, what="condition"):
    """Asserts that `condition` stays truthy for all of `window` seconds:
    the negative check (something must not happen) a wait_for cannot be.
    Fails as soon as it stops holding."""
    deadline = time.monotonic() + window
    while True:
        assert condition(), f"{what} stopped holding within {window}s"
        if time.monotonic() > deadline:
            return
        time.sleep(interval)


def log_time(log, text):
    """The agent's own timestamp (epoch seconds) of its first log line
    containing `text`: durations read from the agent's log do not depend on
    how fast the harness ran on a loaded machine."""
    for line in log.splitlines():
        if text in line and line.startswith("["):
            stamp = line[1:line.index(" ")]
            return datetime.datetime.fromisoformat(stamp).timestamp()
    raise AssertionError(f"no line with {text!r} in:\n{log}")


def pid_alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def process_table():
    """(pid, state, parent pid) of every process, from /proc."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        table.append((int(entry), fields[0], int(fields[1])))
    return table


def descendants(pid):
    """All live descendants of `pid`, from /proc."""
    children = {}
    for child, state, parent in process_table():
        if state != "Z":
            children.setdefault(parent, []).append(child)
    out, frontier = [], [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            out.append(child)
            frontier.append(child)
    return out


def kill_tree(proc):
    """SIGKILLs a still-running Popen and every descendant, then reaps it."""
    if proc.poll() is not None:
        return
    for pid in descendants(proc.pid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    proc.kill()
    proc.wait()


def _ephemeral_low():
    """The lowest port the kernel hands to outgoing connections."""
    try:
        text = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports for the servers that tests start come from below the kernel's
# ephemeral range. A port taken with bind(("", 0)) and released is an
# ephemeral one: any outgoing connection on the machine (a gRPC client, a
# flood) may take it as its source port before the server binds it, and the
# server then fails with "Address already in use" (a CI failure of
# test_store_auth did exactly that). Below the range only an explicit bind
# can take a port, and _handed_out keeps one run from handing a port twice,
# so a process a previous test left behind cannot hold it. The start is
# random so that two runs on one machine rarely probe the same ports.
_PORT_FLOOR = 10000
_handed_out = set()
_next_port = [None]


def _worker_slice(floor, low):
    """[first, end) of the ports this process may hand out. Under
    pytest-xdist (`-n`, as tests/device/check.sh runs the black-box suite)
    each worker process has a slice of its own: _handed_out is per process,
    and two workers probing one port could both find it free and give it to
    two servers."""
    try:
        index = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw"))
        count = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    except (KeyError, ValueError):
        return floor, low
    if not 0 <= index < count:
        return floor, low
    width = (low - floor) // count
    return floor + index * width, floor + (index + 1) * width


def _candidate_ports():
    low = _ephemeral_low()
    if low - _PORT_FLOOR < 2000:  # no room below the range: let the kernel pick
        return None
    first, end = _worker_slice(_PORT_FLOOR, low)
    if _next_port[0] is None:
        _next_port[0] = random.Random(os.getpid()).randrange(first, end)
    span = end - first
    for i in range(span):
        yield first + (_next_port[0] - first + i) % span


def _bindable(port, host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        try:
            # No SO_REUSEADDR: a port in TIME_WAIT counts as taken too.
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(n, host="127.0.0.1"):
    """`n` distinct free TCP ports on `host`, from below the ephemeral
    range, none handed out before in this run."""
    candidates = _candidate_ports()
    if candidates is None:
        return _kernel_ports(n, host)
    ports = []
    for port in candidates:
        if port in _handed_out or not _bindable(port, host):
            continue
        ports.append(port)
        _handed_out.add(port)
        if len(ports) == n:
            _next_port[0] = port + 1
            return ports
    raise RuntimeError(f"no {n} free ports on {host} below the ephemeral range")


def _kernel_ports(n, host):
    """`n` distinct ports the kernel picks: all bound at once, then released."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port(host="127.0.0.1"):
    """A free TCP port on `host` (bound, read, released)."""
    return free_ports(1, host)[0]


def accepting(port, host="127.0.0.1"):
    """Whether `host`:`port` accepts a TCP connection (within a second)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def free_port_on(hosts):
    """A port free on every address of `hosts`, as pods that all serve on
    one port (the MPI spawn servers) need."""
    for _ in range(50):
        port = free_port(hosts[0])
        if all(_bindable(port, h) for h in hosts[1:]):
            return port
    raise RuntimeError(f"no port free on every one of {', '.join(hosts)}")


def spawn(argv, env=None, log=None, stdout=None, **popen_kwargs):
    """Starts `argv` in the background (`env`: the whole environment, None
    to inherit). `log`, a path, receives its stderr, and its stdout too
    unless `stdout` says where that goes (e.g. subprocess.DEVNULL)."""
    if log is None:
        return subprocess.Popen(argv, env=env, stdout=stdout, **popen_kwargs)
    with open(log, "w") as f:
        return subprocess.Popen(
            argv, env=env, stdout=f if stdout is None else stdout,
            stderr=subprocess.STDOUT if stdout is None else f,
            **popen_kwargs)


class Background:
    """Processes started with spawn(), each killed with its descendants at
    close() (or the end of a `with` block) whatever the test did."""

    def __init__(self):
        self.procs = []
        self.logs = []

    def start(self, argv, env=None, log=None, **kwargs):
        proc = spawn(argv, env=env, log=log, **kwargs)
        self.procs.append(proc)
        if log is not None:
            self.logs.append(pathlib.Path(log))
        return proc

    def log_tails(self, lines=40):
        """The last `lines` lines of each process's log: what a failed test
        prints, since CI keeps only the test's output."""
        out = []
        for log in self.logs:
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError as e:
                tail = [f"(unreadable: {e})"]
            out.append(f"----- {log} (last {lines} lines)")
            out.extend(tail)
        return "\n".join(out)

    def close(self):
        for proc in self.procs:
            kill_tree(proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The PyTorch DDP example the multi-agent DDP tests train.
DDP_EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"


def torch_available():
    """Whether Debian's python3-torch is importable."""
    return subprocess.run([PYTHON, "-c", "import torch"],
                          stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


# //workerstore:tcpstore_server_main (DISTJOB_TCPSTORE_SERVER overrides).
TCPSTORE_SERVER = os.environ.get(
    "DISTJOB_TCPSTORE_SERVER",
    str(ROOT / "bazel-bin" / "workerstore" / "tcpstore_server_main"))

# //bench:rank_sim, the TCPStore rank simulator (DISTJOB_RANK_SIM overrides).
RANK_SIM = os.environ.get("DISTJOB_RANK_SIM",
                          str(ROOT / "bazel-bin" / "bench" / "rank_sim"))

# PyTorch's own TCPStore server (Debian's 1.13: the legacy one): prints its
# port, serves until stdin closes.
_REAL_TCPSTORE_SERVER = """
import sys
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=30))
print("port", s.port, flush=True)
sys.stdin.read()
"""


class TcpStoreServer:
    """The workers' store server (tcpstore_server_main) on loopback under
    `background`, its stderr in `log`; its stats on request."""

    def __init__(self, background, log, *flags):
        if not os.path.exists(TCPSTORE_SERVER):
            import pytest
            pytest.fail(f"{TCPSTORE_SERVER} is missing: bazel build "
                        "//workerstore:tcpstore_server_main")
        self.log = log
        self.proc = background.start(
            [TCPSTORE_SERVER, *flags], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
        self.port = int(self.proc.stdout.readline().split()[1])

    def stats(self):
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def logged(self, text):
        with open(self.log) as f:
            return text in f.read()


class RealTcpStoreServer:
    """PyTorch's own TCPStore server under `background`."""

    def __init__(self, background):
        self.proc = background.start(
            [PYTHON, "-c", _REAL_TCPSTORE_SERVER], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline().split()[1])


def start_ddp_agents(background, agent, tmp_path, run_id, worker,
                     nodes=2, nproc=2, flags=()):
    """`nodes` agents of one elastic c10d job on loopback, started through
    `background` (a Background): node i on 127.0.0.{i + 1}, node 0 hosting
    the store, each with `flags` and then the worker command `worker` (a
    list, `--no-python` or `--` first). Their output is piped: read it
    with finish_ddp_agents."""
    port = free_port()
    procs = []
    for i in range(nodes):
        env = dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / f"t{i}"))
        procs.append(background.start(
            [agent, "run", "--nnodes", str(nodes),
             "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
             "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
             "--rdzv-conf", f"is_host={1 if i == 0 else 0}",
             "--local-addr", f"127.0.0.{i + 1}", *flags, *worker],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True))
    return procs


def finish_ddp_agents(procs, timeout):
    """Each agent's output once it exited, asserting that all succeeded."""
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-3000:]
    return outs


def ddp_ranks(out_dir, world_size):
    """The DDP example's per-rank results, asserting that every rank saw
    the whole world and ended with the same model."""
    ranks = [json.loads((out_dir / f"rank{i}.json").read_text())
             for i in range(world_size)]
    assert {r["world_size"] for r in ranks} == {world_size}
    assert len({r["digest"] for r in ranks}) == 1
    return ranks


def self_signed_cert(directory, name, san="DNS:localhost"):
    """A self-signed certificate (its own CA) for `san` and its key, made by
    the openssl CLI at test time: (cert path, key path)."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(cert),
         "-addext", f"subjectAltName={san}"],
        check=True, capture_output=True, timeout=30)
    return cert, key


def make_certs(d):
    """A CA and one node certificate it signs, for servers and clients
    alike (for the pods' names and addresses: here 127.0.0.1 to
    127.0.0.3), plus a stranger's key, made by the openssl CLI in `d`:
    ca.pem, node.pem, node.key, other.key. Another directory's set is a
    peer outside the job: its CA is not this one."""
    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True,
                       capture_output=True, timeout=30)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "1", "-subj", "/CN=distjob test CA")
    ossl("req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj",
         "/CN=distjob node")
    (d / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,"
        "DNS:localhost\n"
        "extendedKeyUsage=serverAuth,clientAuth\n")
    ossl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey",
         "ca.key", "-CAcreateserial", "-out", "node.pem", "-days", "1",
         "-extfile", "ext.cnf")
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt",
         "ec_paramgen_curve:prime256v1", "-out", "other.key")
    return d


# Protobuf's wire format, enough for raw gRPC clients that encode their
# messages by hand (no generated code: tests/integration/test_store_auth.py,
# test_spawn_auth.py).

def pb_varint(n):
    out = bytearray()
    n &= (1 << 64) - 1  # a negative int32/int64 is ten bytes, as protobuf's
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_len(num, data):
    """Field `num`, length-delimited (string, bytes, message)."""
    data = data.encode() if isinstance(data, str) else data
    return pb_varint(num << 3 | 2) + pb_varint(len(data)) + data


def pb_int(num, value):
    """Field `num`, a varint (int32, int64, bool)."""
    return pb_varint(num << 3) + pb_varint(value)


def pb_fields(data):
    """(field number, value) pairs of a message: ints or bytes."""
    i, out = 0, []
    while i < len(data):
        key, i = _pb_read_varint(data, i)
        num, kind = key >> 3, key & 7
        if kind == 0:
            value, i = _pb_read_varint(data, i)
        else:
            n, i = _pb_read_varint(data, i)
            value, i = data[i:i + n], i + n
        out.append((num, value))
    return out


def _pb_read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def rss_bytes(pid):
    """The resident set size of process `pid` (VmRSS), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def get_metrics(port, host="127.0.0.1"):
    """The body of GET http://host:port/metrics; None while nothing
    answers."""
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics",
                                    timeout=2) as r:
            return r.read().decode()
    except OSError:
        return None


# A worker that sets one key in the workers' store (MASTER_ADDR:
# MASTER_PORT, served by the agent; torch 1.13's SET frame: op 0, then
# each field as a native 8-byte length and its bytes) and holds its
# connection until the file argv[1] exists.
STORE_CLIENT_WORKER = (
    "import os, socket, struct, sys, time\n"
    "e = os.environ\n"
    "s = socket.create_connection((e['MASTER_ADDR'], int(e['MASTER_PORT'])))\n"
    "s.sendall(bytes([0]) + b''.join(struct.pack('=Q', len(f)) + f\n"
    "                                for f in (b'/k', b'v')))\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n")


def full_scrape(background, agent, tmp_path, timeout=60):
    """One /metrics text with every family the agent can show: a one-node
    c10d job whose agent hosts the rendezvous store and serves the workers'
    store (a worker connected to it). The agent is stopped before the
    return; `background` (a Background) kills it on any failure."""
    port, rdzv = free_ports(2)
    go = tmp_path / "full-scrape-go"
    env = dict(os.environ,
               DISTJOB_TERMINATION_LOG=str(tmp_path / "termination-log"))
    proc = background.start(
        [agent, "run", "--nnodes", "1", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{rdzv}", "--local-addr", "127.0.0.1",
         "--rdzv-id", "full-scrape", "--metrics-port", str(port),
         "--no-python", PYTHON, "-c", STORE_CLIENT_WORKER, str(go)],
        env=env, log=tmp_path / "full-scrape.log")

    def complete():
        text = get_metrics(port)
        if text is None or "\ndistjob_store_keys{" not in text:
            return None
        if "\ndistjob_store_requests_total{" not in text:
            # The agent's own calls skip gRPC: one `status`, another
            # node's client, gives the store's request series.
            subprocess.run([agent, "status", "--rdzv-endpoint",
                            f"127.0.0.1:{rdzv}", "--rdzv-id", "full-scrape"],
                           env=env, capture_output=True, timeout=30)
            return None
        clients = [line for line in text.splitlines()
                   if line.startswith("distjob_worker_store_clients{")]
        served = "\ndistjob_worker_store_requests_total{" in text
        return text if served and clients and clients[0].endswith(" 1") \
            else None
    try:
        return wait_for(complete, timeout, interval=0.1,
                        what="a scrape with both stores' series")
    finally:
        go.write_text("")
        proc.wait(timeout=30)


# An elastic job's settings that make a dead peer seen within seconds.
FAST = "keep_alive_interval=0.5,keep_alive_max_attempt=2,read_timeout=5"

# The worker of `Job`: records its env and waits for a `go` file, so the
# tests decide when a round may finish.
WORKER = textwrap.dedent("""
    import json, os, pathlib, sys, time
    out = pathlib.Path(sys.argv[1])
    node = os.environ["TEST_NODE"]
    rec = {k: v for k, v in os.environ.items()
           if k in ("LOCAL_RANK", "RANK", "GROUP_RANK", "WORLD_SIZE",
                    "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                    "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
                    "TORCHELASTIC_RUN_ID", "ROLE_RANK", "ROLE_WORLD_SIZE")}
    rec["node"] = node
    rec["pid"] = os.getpid()
    rec["started"] = time.monotonic_ns()
    tmp = out / f".{node}-{os.getpid()}.tmp"
    tmp.write_text(json.dumps(rec))
    tmp.rename(out / f"{node}-{os.getpid()}.json")
    if (os.environ.get("TEST_FAIL_ALWAYS") == node
            and rec["LOCAL_RANK"] == "0"):
        sys.exit(int(os.environ.get("TEST_FAIL_CODE", "137")))
    fail = os.environ.get("TEST_FAIL_ONCE")
    if (fail == node and rec["LOCAL_RANK"] == "0"
            and not (out / "failed").exists()):
        (out / "failed").write_text("x")
        sys.exit(int(os.environ.get("TEST_FAIL_CODE", "137")))
    while not (out / "go").exists():
        time.sleep(0.05)
""")


class Job:
    """Agents of one job, cleaned up whatever happens."""

    def __init__(self, agent, tmp_path, nnodes, conf="", nproc=1,
                 max_restarts=0, backend="c10d", etcd=None):
        self.agent = agent
        self.backend = backend
        self.etcd = etcd
        self.dir = tmp_path
        self.out = tmp_path / "out"
        self.out.mkdir()
        (tmp_path / "worker.py").write_text(WORKER)
        self.port = free_port()
        self.nnodes = nnodes
        self.conf = conf
        self.nproc = nproc
        self.max_restarts = max_restarts
        self.procs = {}
        self.background = Background()

    def status_args(self):
        """The `status` arguments that reach this job's store."""
        if self.backend == "etcd":
            return ["--rdzv-backend", "etcd", "--rdzv-endpoint",
                    self.etcd.endpoints, "--rdzv-conf",
                    f"etcd_prefix=/{self.dir.name}"]
        return ["--rdzv-endpoint", f"127.0.0.1:{self.port}"]

    def start(self, i, env=None, nproc=None):
        node = f"node{i}"
        conf = ("is_host=1" if i == 0 else "is_host=0") + (
            "," + self.conf if self.conf else "")
        endpoint = f"127.0.0.1:{self.port}"
        if self.backend == "etcd":
            # Every test its own namespace in the shared cluster.
            conf += f",etcd_prefix=/{self.dir.name}"
            endpoint = self.etcd.endpoints
        full_env = dict(os.environ)
        full_env.update({"TEST_NODE": node,
                         "DISTJOB_TERMINATION_LOG": str(self.dir / f"t{i}")})
        full_env.update(env or {})
        args = [self.agent, "run", "--nnodes", self.nnodes,
                "--nproc-per-node", str(nproc or self.nproc),
                "--rdzv-backend", self.backend,
                "--rdzv-endpoint", endpoint,
                "--rdzv-id", "testjob", "--rdzv-conf", conf,
                "--local-addr", f"127.0.0.{i + 1}",
                "--max-restarts", str(self.max_restarts),
                "--no-python", PYTHON, str(self.dir / "worker.py"),
                str(self.out)]
        self.procs[i] = self.background.start(
            args, env=full_env, log=self.dir / f"agent{i}.log")
        return self.procs[i]

    def log(self, i):
        return (self.dir / f"agent{i}.log").read_text()

    def records(self):
        out = []
        for p in self.out.glob("*.json"):
            out.append(json.loads(p.read_text()))
        return out

    def latest(self, pred=lambda r: True):
        """The newest record of each (node, local rank) matching `pred`."""
        by = {}
        # By start time: pids wrap (pid_max), a later worker's may be lower.
        for r in sorted(self.records(), key=lambda r: r["started"]):
            if pred(r):
                by[(r["node"], r["LOCAL_RANK"])] = r
        return by

    def wait_round(self, nodes, timeout=60):
        def formed():
            recs = self.latest(
                lambda r: r["GROUP_WORLD_SIZE"] == str(len(nodes)))
            want = {(n, str(lr)) for n in nodes for lr in range(self.nproc)}
            return recs if set(recs) >= want else None
        return wait_for(formed, timeout, interval=0.05,
                        what=f"a round of {nodes}")

    def kill9(self, i):
        kill_tree(self.procs[i])

    def go(self):
        (self.out / "go").write_text("go")

    def cleanup(self):
        self.background.close()


def job_metrics(port):
    """The /metrics of a `Job` agent on `port`, strictly parsed:
    {(name, labels but the job's): value}. (prometheus_client is imported
    here: only tests that scrape need it.)"""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=2) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = {k: v for k, v in s.labels.items()
                      if k not in ("job_name", "role", "node_rank")}
            assert s.labels["job_name"] == "testjob"
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


def job_metric(port, name, **labels):
    """One sample of job_metrics, None when absent."""
    return job_metrics(port).get((name, frozenset(labels.items())))


def raise_fd_limit(n):
    """Raises this process's open-file soft limit to `n` (at most the hard
    limit); skips the test when that is not enough for its connections."""
    import pytest
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < n:
        pytest.skip(f"needs {n} open files")


def agent_env(tmp_path, env=None):
    """The test's environment updated with `env` (a None value unsets one);
    the termination log defaults into `tmp_path`."""
    full_env = dict(os.environ)
    full_env.setdefault("DISTJOB_TERMINATION_LOG",
                        str(tmp_path / "termination-log"))
    for name, value in (env or {}).items():
        if value is None:
            full_env.pop(name, None)  # None unsets
        else:
            full_env[name] = value
    return full_env


# --- MPI jobs (issue 41) ----------------------------------------------------

# The allreduce every MPI test runs on 4 ranks: each rank adds rank + 1 and
# prints one line "rank R/N sum S". With an argument it then sleeps that
# many seconds and enters a Barrier: a job that stays up until a fault ends
# it. mpi4py in Debian is built against Open MPI only, so MPICH runs the
# same program in C (MPI_ALLREDUCE_C, built with mpicc.mpich).
MPI_ALLREDUCE_PY = textwrap.dedent("""
    import os, sys, time
    from mpi4py import MPI
    c = MPI.COMM_WORLD
    total = c.allreduce(c.rank + 1, op=MPI.SUM)
    # One write per line: mpirun interleaves the ranks' output by chunks.
    os.write(1, f"rank {c.rank}/{c.size} sum {total}\\n".encode())
    if len(sys.argv) > 1:
        time.sleep(float(sys.argv[1]))
        c.Barrier()
""")

MPI_ALLREDUCE_C = textwrap.dedent("""
    #include <mpi.h>
    #include <stdio.h>
    #include <stdlib.h>
    #include <unistd.h>
    int main(int argc, char** argv) {
      int rank, size, one, sum;
      MPI_Init(&argc, &argv);
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      one = rank + 1;
      MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      printf("rank %d/%d sum %d\\n", rank, size, sum);
      fflush(stdout);
      if (argc > 1) {
        sleep((unsigned)atoi(argv[1]));
        MPI_Barrier(MPI_COMM_WORLD);
      }
      MPI_Finalize();
      return 0;
    }
""")

# What the 4 ranks of MPI_ALLREDUCE_* report.
MPI_EXPECTED = {f"rank {r}/4 sum 10" for r in range(4)}


def mpi_ranks(output):
    """Every "rank R/N sum S" report in `output`, wherever mpirun's
    forwarding put it on a line."""
    return set(re.findall(r"rank \d+/\d+ sum \d+", output))


def build_mpich_allreduce(directory):
    """MPI_ALLREDUCE_C built with mpicc.mpich in `directory`: its path."""
    source = pathlib.Path(directory) / "allreduce.c"
    source.write_text(MPI_ALLREDUCE_C)
    binary = source.with_suffix("")
    subprocess.run(["mpicc.mpich", "-o", str(binary), str(source)],
                   check=True, timeout=120)
    return binary


def no_ssh_dir(directory):
    """A directory of an `ssh` and an `rsh` that fail the job and say so:
    first on an MPI job's PATH, it shows that nothing called a real one."""
    fake = pathlib.Path(directory) / "no-ssh"
    fake.mkdir(exist_ok=True)
    for name in ("ssh", "rsh"):
        (fake / name).write_text(
            f"#!/bin/sh\necho 'the test's fake {name} was called' >&2\n"
            "exit 255\n")
        (fake / name).chmod(0o755)
    return fake
