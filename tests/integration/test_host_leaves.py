"""The store's host leaving is not a failure of the others: a host that
leaves on exit_barrier_timeout, or on a stop signal in its exit barrier,
after its workers succeeded lets a node still training finish and exit 0
promptly; a host killed mid-training still ends the others with 138 within
read_timeout."""

import os
import signal
import time


from harness import (CLEAN_JOB_ENV, free_port, holds_for,
                     wait_for)

WAIT_FOR_GO = "while [ ! -e \"$GO\" ]; do sleep 0.05; done"
# Long enough that the bound on a prompt exit below (KEEP_ALIVE + 2 s)
# leaves the ASan build room and still fails an agent that waited out one
# store call's read_timeout.
READ_TIMEOUT = 4
KEEP_ALIVE = 1
CONF = (f"join_timeout=30,read_timeout={READ_TIMEOUT},"
        f"keep_alive_interval={KEEP_ALIVE},exit_barrier_timeout=1")


def start(start_agent, tmp_path, name, port, is_host, *command, conf=CONF):
    env = dict(CLEAN_JOB_ENV,
               DISTJOB_TERMINATION_LOG=str(tmp_path / f"{name}.term"),
               GO=str(tmp_path / "go"))
    return start_agent(
        ["run", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend",
         "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "hl",
         "--rdzv-conf", f"is_host={int(is_host)},{conf}", "--no-python",
         "--", *command], env=env, log=tmp_path / f"{name}.log")


def log(tmp_path, name):
    path = tmp_path / f"{name}.log"
    return path.read_text() if path.exists() else ""


def test_host_leaving_after_success_lets_the_others_finish(start_agent,
                                                          tmp_path):
    port = free_port()
    host = start(start_agent, tmp_path, "host", port, True, "/bin/true")
    other = start(start_agent, tmp_path, "other", port, False,
                  "/bin/sh", "-c", WAIT_FOR_GO)
    assert host.wait(timeout=30) == 0, log(tmp_path, "host")
    assert "finishes without the store" in log(tmp_path, "other"), (
        log(tmp_path, "host"), log(tmp_path, "other"))
    # Past read_timeout without the store the node still trains.
    holds_for(lambda: other.poll() is None, READ_TIMEOUT + 1,
              what="the other node training without the store")
    (tmp_path / "go").write_text("")
    ended = time.monotonic()
    assert other.wait(timeout=20) == 0, log(tmp_path, "other")
    # Its worker polls every 50 ms: the agent exits within one keep-alive
    # interval of it, with slack for the ASan build, and in less than one
    # read_timeout (no store call waited for the store that is gone).
    assert time.monotonic() - ended < KEEP_ALIVE + 2, log(tmp_path, "other")


def test_host_stopped_in_its_exit_barrier_tells_the_others(start_agent,
                                                           tmp_path):
    # A barrier far longer than the test: only the stop signal ends it.
    conf = CONF.replace("exit_barrier_timeout=1", "exit_barrier_timeout=300")
    port = free_port()
    host = start(start_agent, tmp_path, "host", port, True, "/bin/true",
                 conf=conf)
    other = start(start_agent, tmp_path, "other", port, False,
                  "/bin/sh", "-c", WAIT_FOR_GO, conf=conf)
    wait_for(lambda: "exit barrier of round" in log(tmp_path, "host"), 30,
             what="the host in its exit barrier")
    os.kill(host.pid, signal.SIGTERM)
    stopped = time.monotonic()
    # Told at once, not after read_timeout by a store that went away.
    wait_for(lambda: "finishes without the store" in log(tmp_path, "other"),
             READ_TIMEOUT - 1, what="the other node told the host left")
    assert time.monotonic() - stopped < 1.5, log(tmp_path, "other")
    assert host.wait(timeout=10) == 128 + signal.SIGTERM, log(tmp_path, "host")
    # Its worker was left to finish: the node exits 0 once it does.
    holds_for(lambda: other.poll() is None, READ_TIMEOUT + 1,
              what="the other node training without the store")
    (tmp_path / "go").write_text("")
    assert other.wait(timeout=20) == 0, log(tmp_path, "other")


def test_host_killed_mid_training_still_ends_the_others(start_agent, tmp_path):
    port = free_port()
    host = start(start_agent, tmp_path, "host", port, True,
                 "/bin/sh", "-c", WAIT_FOR_GO)
    other = start(start_agent, tmp_path, "other", port, False,
                  "/bin/sh", "-c", WAIT_FOR_GO)
    wait_for(lambda: "group rank" in log(tmp_path, "other")
             and "group rank" in log(tmp_path, "host"), 30,
             what="the round to close")
    os.kill(host.pid, signal.SIGKILL)
    killed = time.monotonic()
    assert other.wait(timeout=30) == 138, log(tmp_path, "other")
    assert time.monotonic() - killed < READ_TIMEOUT + KEEP_ALIVE + 1.5, (
        log(tmp_path, "other"))
