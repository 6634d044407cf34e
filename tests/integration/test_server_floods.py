"""Idle-connection floods against every server the agent runs besides the
workers' TCPStore (tests/integration/test_worker_store_hostile.py): the
rendezvous store a c10d host serves, the HTTP /metrics server and the gRPC
health server. Each flood opens connections from a few loopback addresses
and holds them idle: silent ones (never a byte) and ones that finished
their handshake (HTTP/2's preface and SETTINGS for gRPC, one answered
request with keep-alive for HTTP). What each held connection costs is
read from the agent's heap in use (its /metrics) before and while they are
held; that the memory goes back, from its resident size before and 5 s
after they closed. Both are bounded as the limits of docs/rendezvous.md
and docs/worker-store.md say (issue 39, item 1). Loopback only, bounded in
count and time."""

import re
import socket
import subprocess
import time

import pytest

from harness import (accepting, free_port, get_metrics, raise_fd_limit,
                     rss_bytes, wait_for)

KIB = 1024
MIB = 1024 * KIB
# The HTTP/2 client connection preface and an empty SETTINGS frame: what
# a gRPC client sends first; the server then holds a transport for it.
H2_HELLO = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" +
            b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")


def open_idle(port, count, hello, addresses):
    """`count` connections to `port`, spread over `addresses`, each sending
    `hello` (b"": nothing) and then idle."""
    held = []
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        s.bind((addresses[i % len(addresses)], 0))
        s.connect(("127.0.0.1", port))
        if hello:
            s.sendall(hello)
        held.append(s)
    return held


def heap_in_use(metrics_port):
    """The agent's distjob_heap_in_use_bytes: what malloc has handed out and
    not had back. Unlike RSS it neither moves in the allocator's steps nor
    keeps what was freed, so what a connection holds can be read exactly
    from 60 of them as from 1,500."""
    text = get_metrics(metrics_port)
    assert text is not None, f"no /metrics on port {metrics_port}"
    match = re.search(r"^distjob_heap_in_use_bytes(?:\{[^}]*\})? (\S+)$",
                      text, re.M)
    assert match, "no distjob_heap_in_use_bytes on /metrics"
    return float(match.group(1))


def sample(pid, metrics_port, seconds):
    """(heap in use, RSS) of `pid` after `seconds` (the server's timers
    run)."""
    time.sleep(seconds)
    return heap_in_use(metrics_port), rss_bytes(pid)


def measure(pid, metrics_port, port, count, hello, addresses):
    """(heap, RSS) of `pid` before and while `count` idle connections are
    held, and RSS 5 s after they closed. A flood of up to 64 goes first:
    what the server sets up once (threads' caches, lazily made tables) is
    not what a connection holds."""
    for s in open_idle(port, min(count, 64), hello, addresses):
        s.close()
    before = sample(pid, metrics_port, 1)
    held = open_idle(port, count, hello, addresses)
    try:
        during = sample(pid, metrics_port, 1)
    finally:
        for s in held:
            s.close()
    return before, during, sample(pid, metrics_port, 5)[1]


# The most an idle connection may hold (issue 39, item 1; the limits
# tables of docs/rendezvous.md and docs/worker-store.md): 4 KiB where our
# own code holds it (a silent connection before its first bytes, an HTTP
# keep-alive connection), and what gRPC's HTTP/2 transport keeps for a
# connection that finished its handshake on the rendezvous store or the
# health server: 21.3 KiB on the store with gRPC 1.51, whatever its channel
# arguments say (read chunk sizes, HPACK tables, BDP probe, lookahead and
# write buffer: each tried, none moved it by a byte); each server's
# connection cap bounds the sum. How far the RSS may stay above its size
# before a flood once the flood has been gone 5 s.
IDLE_CONNECTION_BYTES = 4 * KIB
GRPC_TRANSPORT_BYTES = 22 * KIB
AFTER_FLOOD_FACTOR = 2
GET = b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"
# (server, first bytes, connections held, source addresses, bound per
# connection): each within the server's caps, so that all are held and
# none is evicted.
FLOODS = {
    "store-silent": ("store", b"", 1500, 24, IDLE_CONNECTION_BYTES),
    "store-http2": ("store", H2_HELLO, 1500, 24, GRPC_TRANSPORT_BYTES),
    "metrics-silent": ("metrics", b"", 60, 4, IDLE_CONNECTION_BYTES),
    "metrics-keepalive": ("metrics", GET, 60, 4, IDLE_CONNECTION_BYTES),
    "health-silent": ("health", b"", 60, 2, IDLE_CONNECTION_BYTES),
    "health-http2": ("health", H2_HELLO, 60, 2, GRPC_TRANSPORT_BYTES),
}


@pytest.fixture
def host(start_agent, tmp_path):
    """A c10d agent hosting the rendezvous store and waiting for its peer,
    with /metrics and the gRPC health server: (Popen, store port, metrics
    port, health port)."""
    store, metrics, health = free_port(), free_port(), free_port()
    p = start_agent(
        ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{store}", "--rdzv-id", "floods",
         "--rdzv-conf", "join_timeout=300", "--metrics-port", str(metrics),
         "--health-port", str(health), "--", "true"],
        log=tmp_path / "host.log", stdout=subprocess.DEVNULL)
    for port in (store, metrics, health):
        wait_for(lambda: accepting(port), 30, what=f"port {port} listening")
    return p, store, metrics, health


@pytest.mark.parametrize("flood", sorted(FLOODS))
def test_an_idle_flood_holds_little_and_gives_it_back(host, flood):
    server, hello, count, sources, bound = FLOODS[flood]
    raise_fd_limit(count + 256)
    proc, store, metrics, health = host
    port = {"store": store, "metrics": metrics, "health": health}[server]
    addresses = [f"127.0.0.{i}" for i in range(2, 2 + sources)]
    before, during, after = measure(proc.pid, metrics, port, count, hello,
                                    addresses)
    per_connection = (during[0] - before[0]) / count
    figures = (f"{flood}: {count} connections, heap in use "
               f"{before[0] // KIB:.0f} KiB before, {during[0] // KIB:.0f} "
               f"KiB held; RSS {before[1] // KIB} KiB before, "
               f"{during[1] // KIB} KiB held, {after // KIB} KiB 5 s after: "
               f"{per_connection:.0f} bytes a connection")
    print(figures)
    assert per_connection <= bound, figures
    assert after <= AFTER_FLOOD_FACTOR * before[1], figures
    assert proc.poll() is None, "the agent ended during the flood"
