"""A bounded flood against the store an agent hosts, on loopback: keys
until the store is full, big values, concurrent listings, parked gets and
watches from clients that then go away, and raw connections that never
speak HTTP/2. The host's resident memory stays under the ceiling the
store limits table of docs/rendezvous.md documents, every parked wait is
freed with its call, and the 2-node job the store serves still completes.

The client is Debian's python3-grpcio over stubs that protoc generates
from proto/store.proto at test time (grpc_tools is not needed: the calls
go through the channel's generic unary_unary)."""

import importlib.util
import socket
import subprocess
import threading
import time

import pytest

from harness import FAST, ROOT, Job, free_port, wait_for
from harness import job_metric as metric

grpc = pytest.importorskip("grpc")

MIB = 1 << 20
# The store limits (docs/rendezvous.md): data 256 MiB and parked waits
# 64 MiB with their overhead, gRPC's buffers 128 MiB (its resource quota), and the
# agent itself (~30 MiB resident before it hosts anything).
CEILING = (256 + 64 + 128 + 32) * MIB
# The limits as the store names them in its answers.
MAX_KEYS_PER_REQUEST = 4096
MAX_VALUE_BYTES = MIB


def store_stubs(tmp_path):
    """store_pb2, generated from the repository's proto by protoc."""
    subprocess.run(["protoc", f"-I{ROOT / 'proto'}",
                    f"--python_out={tmp_path}", "store.proto"], check=True)
    spec = importlib.util.spec_from_file_location(
        "store_pb2", tmp_path / "store_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Client:
    """One channel (one connection) to the store."""

    def __init__(self, pb, endpoint):
        self.pb = pb
        self.channel = grpc.insecure_channel(
            endpoint, options=[("grpc.use_local_subchannel_pool", 1)])

    def call(self, method, raw=False):
        """The stub of `method`; `raw`: it takes the request's encoding."""
        req = getattr(self.pb, f"{method}Request")
        resp = getattr(self.pb, f"{method}Response")
        return self.channel.unary_unary(
            f"/distjob.store.v1.Store/{method}",
            request_serializer=(lambda b: b) if raw else req.SerializeToString,
            response_deserializer=resp.FromString)

    def close(self):
        self.channel.close()


def field(number, payload):
    """A length-delimited protobuf field (payloads under 128 bytes): a
    million small keys encode in a fraction of what message objects take."""
    assert len(payload) < 128
    return bytes((number << 3 | 2, len(payload))) + payload


def small_keys(batch):
    return [f"flood/s/{batch}/{i}".encode()
            for i in range(MAX_KEYS_PER_REQUEST)]


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """Samples a process's VmRSS every 20 ms while the flood runs."""

    def __init__(self, pid):
        self.pid = pid
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.02):
            try:
                self.peak = max(self.peak, vm_rss(self.pid))
            except FileNotFoundError:
                return

    def close(self):
        self.stop.set()
        self.thread.join()
        return self.peak


def code_of(call):
    try:
        call()
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def fill_until_refused(send, attempts=400):
    """Calls `send(i)` for i = 0, 1, ... until the store refuses one, which
    must be for its memory (max_total_bytes); returns how many it took."""
    for i in range(attempts):
        code, details = code_of(lambda: send(i))
        if code != grpc.StatusCode.OK:
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED \
                and "max_total_bytes" in details, (code, details, i)
            return i
    raise AssertionError(f"the store took {attempts} requests, refusing none")


def flood(pb, endpoint, metrics_port):
    c = Client(pb, endpoint)
    Set, Delete, List = c.call("Set"), c.call("Delete"), c.call("List")
    Get = c.call("Get")
    # Requests over a per-request limit are refused, naming it.
    code, details = code_of(lambda: Get(pb.GetRequest(
        keys=["x" * 5000], timeout_ms=1000), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and \
        "max_key_bytes" in details, details
    code, details = code_of(lambda: Delete(pb.DeleteRequest(
        keys=[f"k{i}" for i in range(MAX_KEYS_PER_REQUEST + 1)]), timeout=10))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and \
        "max_keys_per_request" in details, details

    # Big values until the store is full, read by six listings at once.
    big = b"v" * (MAX_VALUE_BYTES - 64)
    stored = fill_until_refused(lambda i: Set(pb.SetRequest(
        kvs=[pb.KeyValue(key=f"flood/big/{i:04d}", value=big)]), timeout=10))
    pages = []

    def lister():
        page = List(pb.ListRequest(prefix="flood/"), timeout=30)
        pages.append(len(page.entries))
        List(pb.ListRequest(prefix="flood/",
                            start_after=page.entries[-1].key), timeout=30)
    listers = [threading.Thread(target=lister) for _ in range(6)]
    for t in listers:
        t.start()
    for t in listers:
        t.join()
    assert len(pages) == 6 and max(pages) <= 5, pages  # 4 MiB pages
    # The last 48 MiB of the store, then, go to empty values under many
    # keys: each costs its overhead, not 0 bytes.
    keys = [f"flood/big/{i:04d}" for i in range(stored)]
    Delete(pb.DeleteRequest(keys=keys[-48:]), timeout=30)
    raw_set, raw_delete = c.call("Set", raw=True), c.call("Delete", raw=True)
    batches = fill_until_refused(lambda batch: raw_set(b"".join(
        field(1, field(1, k)) for k in small_keys(batch)), timeout=30))
    # At least 200 bytes counted a key (payload: about 14).
    assert batches < 48 * MIB // MAX_KEYS_PER_REQUEST // 200, batches
    Delete(pb.DeleteRequest(keys=keys[:-48]), timeout=30)
    for batch in range(batches):
        raw_delete(b"".join(field(1, k) for k in small_keys(batch)),
                   timeout=30)

    # Parked gets and watches (a timeout of years among them) from clients
    # that then go away: each is freed with its call.
    before = metric(metrics_port, "distjob_store_parked_waits")
    waiters = []
    calls = []
    for n in range(8):
        w = Client(pb, endpoint)
        waiters.append(w)
        wget, wwatch = w.call("Get"), w.call("Watch")
        for i in range(250):
            if i % 2:
                calls.append(wget.future(pb.GetRequest(
                    keys=[f"flood/never/{n}/{i}"],
                    timeout_ms=3600 * 24 * 365 * 1000 * 2)))
            else:
                calls.append(wwatch.future(pb.WatchRequest(
                    prefix=f"flood/never/{n}/{i}/", after_revision=1 << 60,
                    timeout_ms=600 * 1000)))
    wait_for(lambda: metric(metrics_port, "distjob_store_parked_waits")
             >= before + 2000, 20, what="2000 parked calls")
    for w in waiters:
        w.close()
    wait_for(lambda: metric(metrics_port, "distjob_store_parked_waits")
             <= before, 20, what="the parked calls freed")
    c.close()


# The flood's own address: loopback is a /8, so it differs from the real
# members' 127.0.0.1 as another pod's address would.
FLOODER = "127.0.0.9"


def connect_from(source, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def connection_flood(port, count, sockets, first_bytes=b""):
    """`count` connections from FLOODER to the store on `port`, each sending
    `first_bytes` and then nothing, appended to `sockets` (the test closes
    them whatever happens)."""
    for _ in range(count):
        s = connect_from(FLOODER, port)
        sockets.append(s)
        if first_bytes:
            s.sendall(first_bytes)


def metric_once_up(port, name, **labels):
    """metric(), or None while the agent's metrics server is not up yet."""
    try:
        return metric(port, name, **labels)
    except OSError:
        return None


def test_a_flood_leaves_the_host_under_its_ceiling_and_the_job_completes(
        agent, tmp_path):
    pb = store_stubs(tmp_path)
    job = Job(agent, tmp_path, nnodes="2", conf=FAST)
    metrics_port = free_port()
    endpoint = f"127.0.0.1:{job.port}"
    sockets = []
    try:
        host = job.start(0, env={"DISTJOB_METRICS_PORT": str(metrics_port)})
        wait_for(lambda: metric_once_up(metrics_port, "distjob_store_keys")
                 is not None, 20, what="the store hosted")
        peak = PeakRss(host.pid)
        try:
            # Raw connections from one address that never send the HTTP/2
            # preface: past store_max_conns_per_peer (64) closed at once,
            # the others at the first-bytes timeout, and in the meantime
            # the real members (other addresses) still get in.
            connection_flood(job.port, 1100, sockets)
            opened = time.monotonic()
            wait_for(lambda: metric(metrics_port,
                                    "distjob_store_connections_closed_total",
                                    reason="refused") >= 1100 - 64, 20,
                     what="the flood's connections past the cap refused")
            assert metric(metrics_port, "distjob_store_connections") <= 64
            flood(pb, endpoint, metrics_port)
            job.start(1)
            job.wait_round(["node0", "node1"])
            for s in sockets:
                s.settimeout(max(1, 20 - (time.monotonic() - opened)))
                try:  # past the server's preface: closed by the host
                    while s.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
        finally:
            rss = peak.close()
        assert rss < CEILING, f"peak VmRSS {rss / MIB:.0f} MiB"
        job.go()
        for i in (0, 1):
            assert job.procs[i].wait(60) == 0, job.log(i)
    finally:
        for s in sockets:
            s.close()
        job.cleanup()


def test_a_connection_flood_at_the_cap_lets_a_member_in_and_counts_drop(
        agent, tmp_path):
    """300 connections from one address against store_max_conns=16: the
    host holds at most 16, a real member from another address still joins
    (the flood's oldest makes room), and the count drops as they close."""
    job = Job(agent, tmp_path, nnodes="2",
              conf=FAST + ",store_max_conns=16,store_max_conns_per_peer=16")
    metrics_port = free_port()
    sockets = []
    try:
        job.start(0, env={"DISTJOB_METRICS_PORT": str(metrics_port)})

        def connections():
            return metric_once_up(metrics_port, "distjob_store_connections")
        wait_for(lambda: connections() is not None, 20,
                 what="the store hosted")
        connection_flood(job.port, 300, sockets,
                         first_bytes=b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

        def closed(reason):
            return metric(metrics_port,
                          "distjob_store_connections_closed_total",
                          reason=reason)
        wait_for(lambda: closed("refused") == 300 - 16, 20,
                 what="the flood past the cap refused")
        assert connections() == 16
        job.start(1)
        job.wait_round(["node0", "node1"])
        assert closed("evicted") >= 1
        assert connections() <= 16
        for s in sockets:
            s.close()
        # What is left is the member's own.
        wait_for(lambda: connections() <= 2, 20,
                 what="the flood's connections no longer counted")
        host = (tmp_path / "agent0.log").read_text()
        assert f"refused a connection from {FLOODER}" in host
        assert "store_max_conns" in host
        job.go()
        for i in (0, 1):
            assert job.procs[i].wait(60) == 0, job.log(i)
    finally:
        for s in sockets:
            s.close()
        job.cleanup()
