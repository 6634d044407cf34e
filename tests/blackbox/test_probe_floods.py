"""Probes that floods from the network cannot starve (issue 39, item 4):
silent connections held open to --metrics-port while /healthz is probed
with the kubelet's 1 s timeout, and to --health-port of an agent with few
descriptors whose worker then fails retryably: the agent still exits with
the worker's code and writes its whole termination message."""

import errno
import resource
import select
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

from harness import free_port, wait_for

SILENT = 200


def healthz(port, timeout):
    """The status of GET /healthz, 0 when there is no answer in time."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz",
                                    timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, socket.timeout):
        return 0


def open_silent(port, address):
    """A connection from `address` to `port` that is being opened
    (non-blocking: a server that stops accepting leaves it pending rather
    than stalls the test) and will never send a byte."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((address, 0))
    s.setblocking(False)
    code = s.connect_ex(("127.0.0.1", port))
    assert code in (0, errno.EINPROGRESS), code
    return s


def top_up(flood, port, count, address="127.0.0.1"):
    """Replaces the connections of `flood` the server closed, so that
    `count` stay held open (or pending)."""
    poller = select.poll()
    for s in flood:
        poller.register(s, select.POLLIN)
    by_fd = {s.fileno(): s for s in flood}
    for fd, _ in poller.poll(0):
        s = by_fd[fd]
        try:
            closed = s.recv(1) == b""
        except (BlockingIOError, InterruptedError):
            closed = False
        except OSError:
            closed = True
        if closed:
            flood.remove(s)
            s.close()
    while len(flood) < count:
        flood.append(open_silent(port, address))


def test_healthz_answers_every_probe_while_silent_connections_are_held(
        start_agent, tmp_path):
    port = free_port()
    start_agent(["run", "--metrics-port", str(port), "--",
                 "sh", "-c", "while :; do sleep 1; done"],
                log=tmp_path / "agent.stderr", stdout=subprocess.DEVNULL)
    wait_for(lambda: healthz(port, 1) == 200, 10, what="/healthz 200")
    flood = []
    try:
        failed = []
        for i in range(10):
            # The server closes silent connections (their head deadline);
            # the flood opens them again, as an attacker would.
            top_up(flood, port, SILENT)
            began = time.monotonic()
            status = healthz(port, 1)
            if status != 200:
                failed.append((i, status, time.monotonic() - began))
        assert not failed, f"probes failed (probe, status, seconds): {failed}"
    finally:
        for s in flood:
            s.close()


def few_fds():
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_fd_limited_agent_flooded_on_health_port_keeps_worker_code(
        agent, start_agent, tmp_path):
    port = free_port()
    go = tmp_path / "go"
    log = tmp_path / "termination-log"
    p = start_agent(
        ["run", "--health-port", str(port), "--max-restarts", "0", "--",
         "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; kill -9 $$"],
        env={"DISTJOB_TERMINATION_LOG": str(log)},
        log=tmp_path / "agent.stderr", stdout=subprocess.DEVNULL,
        preexec_fn=few_fds)

    def serving():
        r = subprocess.run([agent, "health", "--port", str(port)],
                           capture_output=True, text=True, timeout=10)
        return r.returncode == 0
    wait_for(serving, 10, what="the health port serving")
    flood = []
    try:
        # More silent connections than the agent has descriptors, from
        # another loopback address than the probes', as from the pod
        # network; held (re-opened) for a while.
        until = time.monotonic() + 1.5
        while time.monotonic() < until:
            top_up(flood, port, 400, address="127.0.0.2")
            time.sleep(0.05)
        assert serving(), "the health probe failed during the flood"
        go.write_text("")
        while p.poll() is None and time.monotonic() < until + 15:
            top_up(flood, port, 400, address="127.0.0.2")
            time.sleep(0.05)
    finally:
        for s in flood:
            s.close()
    assert p.wait(timeout=15) == 128 + signal.SIGKILL, \
        (tmp_path / "agent.stderr").read_text()[-3000:]
    message = log.read_text()
    assert message.startswith(
        "distjob-agent: retryable exit_code=137"), message
    assert "signal=SIGKILL" in message
    assert "root cause: local_rank=0" in message
