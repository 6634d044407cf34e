"""The TCPStore rank simulator (bench/rank_sim.cc) against the workers'
store server (//workerstore:tcpstore_server_main): at 2,000 ranks every
rank passes the store barrier and the server counts 2,000 connections;
the NCCL-style and all-gather patterns complete at a smaller size with
every value checked; the same ranks in 1.13's numbering complete against
Debian's PyTorch 1.13 TCPStore server, so the frames are PyTorch's and not
only what our server accepts; a bad flag exits 2 naming it. A test of the
simulator's correctness, not a benchmark: it asserts no timings.

Needs `bazel build //bench:rank_sim //workerstore:tcpstore_server_main`
(DISTJOB_RANK_SIM and DISTJOB_TCPSTORE_SERVER override the paths)."""

import json
import os
import subprocess

import pytest

from harness import (RANK_SIM as SIM, Background, RealTcpStoreServer,
                     TcpStoreServer, raise_fd_limit)

RANKS = 2000
# The simulator's own bound on every wait; a run at this size takes well
# under a second on 2 cores.
TIMEOUT_S = 20


def binary(path, target):
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: bazel build {target}")
    return path


def simulate(bg, server, ranks, pattern, *flags, hold=False):
    """Starts the simulator; its report (the first stdout line) and the
    process, still running when `hold`."""
    argv = [binary(SIM, "//bench:rank_sim"), "--port", str(server.port),
            "--ranks", str(ranks), "--pattern", pattern,
            "--timeout-s", str(TIMEOUT_S),
            "--server-pid", str(server.proc.pid), *flags]
    if hold:
        argv.append("--hold")
    proc = bg.start(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return json.loads(line), proc


@pytest.fixture
def server(tmp_path):
    # The server holds a descriptor a rank beside its own 256 (it raises
    # its soft limit to the hard one, as the agent), the simulator one a
    # rank.
    raise_fd_limit(2 * RANKS + 512)
    with Background() as bg:
        yield bg, TcpStoreServer(bg, tmp_path / "server.log", "--host",
                                 "127.0.0.1")


def test_2k_ranks_pass_the_barrier(server):
    bg, srv = server
    report, proc = simulate(bg, srv, RANKS, "barrier", hold=True)
    assert report["passed"] == RANKS, report
    assert report["failed"] == 0
    assert report["all_done_s"] is not None
    assert report["latency_ms"]["max"] >= report["latency_ms"]["p50"] > 0
    assert report["server"]["peak_rss_kib"] > 0
    # Held open by --hold: the server counts every rank's connection, and
    # one validation, add and wait from each.
    stats = srv.stats()
    assert stats["clients"] == RANKS, stats
    assert stats["requests"]["validate"] == RANKS
    assert stats["requests"]["add"] == RANKS
    assert stats["requests"]["wait"] == RANKS
    assert stats["requests"]["set"] == 1  # the last rank's release
    assert stats["protocol_errors"] == 0
    assert stats["refused_connections"] == 0
    proc.stdin.close()
    assert proc.wait(timeout=TIMEOUT_S) == 0, proc.stderr.read()


@pytest.mark.parametrize("pattern,ranks,expected", [
    ("nccl", 500, {"set": 1, "wait": 500, "get": 499}),
    # 299 others' keys in batches of 128: 3 waits and 3 multi_gets a rank.
    ("allgather", 300, {"set": 300, "wait": 900, "multi_get": 900}),
])
def test_other_patterns_complete(server, pattern, ranks, expected):
    bg, srv = server
    report, proc = simulate(bg, srv, ranks, pattern, "--batch", "128")
    assert proc.wait(timeout=TIMEOUT_S) == 0, proc.stderr.read()
    assert report["passed"] == ranks, report
    stats = srv.stats()
    for op, n in expected.items():
        assert stats["requests"][op] == n, (op, stats)
    assert stats["protocol_errors"] == 0


def test_a_wrong_answer_fails_the_rank(server):
    """The simulator checks what it reads: a barrier counter the ranks
    did not start from zero (the last run's, same --prefix) is an add
    answer outside the world; another prefix starts afresh."""
    bg, srv = server
    report, proc = simulate(bg, srv, 10, "barrier")
    assert proc.wait(timeout=TIMEOUT_S) == 0
    report, proc = simulate(bg, srv, 10, "barrier")
    assert proc.wait(timeout=TIMEOUT_S) == 1
    assert report["failed"] == 10 and report["all_done_s"] is None
    assert "outside [1, 10]" in proc.stderr.read()
    report, proc = simulate(bg, srv, 10, "barrier", "--prefix", "again/")
    assert proc.wait(timeout=TIMEOUT_S) == 0
    assert report["passed"] == 10


@pytest.fixture(scope="module")
def real_server():
    pytest.importorskip("torch.distributed")
    with Background() as bg:
        yield bg, RealTcpStoreServer(bg)


@pytest.mark.parametrize("pattern,prefix", [
    ("barrier", "b/"), ("nccl", "n/"), ("allgather", "a/")])
def test_legacy_ranks_complete_against_pytorch_tcpstore(real_server, pattern,
                                                        prefix):
    bg, srv = real_server
    report, proc = simulate(bg, srv, 300, pattern, "--dialect", "legacy",
                            "--batch", "128", "--prefix", prefix)
    assert proc.wait(timeout=TIMEOUT_S) == 0, proc.stderr.read()
    assert report["passed"] == 300, report


@pytest.mark.parametrize("flags,named", [
    (["--ranks", "10"], "--port"),
    (["--port", "1", "--ranks", "0"], "--ranks"),
    (["--port", "1", "--ranks", "1", "--pattern", "ring"], "--pattern"),
    (["--port", "1", "--ranks", "1", "--timeout-s", "-1"], "--timeout-s"),
    (["--port", "1", "--ranks", "1", "--host", "localhost"], "--host"),
    (["--port", "1", "--ranks", "1", "--dialect", "1.13"], "--dialect"),
    (["--port", "1", "--ranks", "1", "--frobnicate", "1"], "--frobnicate"),
])
def test_bad_flags_exit_2_naming_the_flag(flags, named):
    done = subprocess.run([binary(SIM, "//bench:rank_sim"), *flags],
                          capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr
