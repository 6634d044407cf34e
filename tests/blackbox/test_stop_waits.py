"""A stop signal ends every wait of the agent within a second: the DNS
wait, the start barrier, the rendezvous join and its last call, the restart
backoff and the exit barrier. The agent exits 128+signal and its
termination message names where it was waiting; no worker starts after the
signal; join_timeout holds when the store does not answer."""

import signal
import time

import pytest


from harness import CLEAN_JOB_ENV, free_port, wait_for

# A worker that waits for a file, and records that it started.
WAIT_FOR_GO = ("touch \"$STARTED\"; "
               "while [ ! -e \"$GO\" ]; do sleep 0.05; done")


class Agents:
    """Agents of one test, with their logs and termination messages."""

    def __init__(self, start_agent, tmp_path):
        self.start_agent = start_agent
        self.dir = tmp_path
        self.procs = {}

    def start(self, name, args, env=None):
        full = dict(CLEAN_JOB_ENV,
                    DISTJOB_TERMINATION_LOG=str(self.dir / f"{name}.term"),
                    STARTED=str(self.dir / f"{name}.started"),
                    GO=str(self.dir / "go"))
        full.update(env or {})
        self.procs[name] = self.start_agent(args, env=full,
                                            log=self.dir / f"{name}.log")
        return self.procs[name]

    def log(self, name):
        path = self.dir / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def message(self, name):
        return (self.dir / f"{name}.term").read_text()

    def wait_log(self, name, text, timeout=30):
        wait_for(lambda: text in self.log(name)
                 or self.procs[name].poll() is not None, timeout,
                 what=f"'{text}' in {name}'s log")
        assert self.procs[name].poll() is None, self.log(name)

    def stop(self, name):
        """SIGTERM; returns the exit code and how long the exit took."""
        start = time.monotonic()
        self.procs[name].send_signal(signal.SIGTERM)
        code = self.procs[name].wait(timeout=20)
        return code, time.monotonic() - start


def c10d(port, nnodes, conf, *command):
    return ["run", "--nnodes", nnodes, "--nproc-per-node", "1",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", "stopjob", "--rdzv-conf", conf, "--no-python",
            "--", *command]


def dns_wait(agents, tmp_path):
    vc = tmp_path / "volcano"
    vc.mkdir()
    (vc / "worker.host").write_text("a.j\nb.j")
    agents.start("a", ["run", "--volcano-dir", str(vc), "--hostname",
                       "j-worker-0", "--dns-server", "127.0.0.1:9",
                       "--dns-timeout", "300", "--no-python", "--",
                       "/bin/true"])
    agents.wait_log("a", "waiting for")
    return "while waiting for the peers' DNS names (2/2 not resolved: a.j, b.j)"


def start_barrier(agents, tmp_path):
    vc = tmp_path / "volcano"
    vc.mkdir()
    (vc / "ps.host").write_text("127.0.0.1")
    (vc / "worker.host").write_text("127.0.0.2\n127.0.0.3")
    agents.start("a", ["run", "--volcano-dir", str(vc), "--job-name", "tfjob",
                       "--dns-timeout", "0", "--barrier-port",
                       str(free_port()), "--barrier-timeout", "600", "--task",
                       "ps", "--task-index", "0", "--local-addr",
                       "127.0.0.1", "--no-python", "--", "/bin/true"])
    # Not "start barrier: waiting", logged before this pod joined the
    # barrier's round: a stop then finds no pod arrived, not even this one.
    agents.wait_log("a", "round 0 of 'tfjob': waiting for nodes to join")
    return ("while waiting for the start barrier of job 'tfjob' (1/3 pods "
            "arrived; missing: worker-0, worker-1)")


def rendezvous_join(agents, tmp_path):
    agents.start("a", c10d(free_port(), "2", "is_host=1,join_timeout=600",
                           "/bin/true"))
    agents.wait_log("a", "waiting for nodes to join")
    return "while waiting for the rendezvous round 0 (1/2 nodes joined)"


def last_call(agents, tmp_path):
    agents.start("a", c10d(free_port(), "1:2",
                           "is_host=1,join_timeout=600,last_call_timeout=600",
                           "/bin/true"))
    agents.wait_log("a", "last call for")
    return "while waiting for the last call of rendezvous round 0 (1 nodes"


def restart_backoff(agents, tmp_path):
    agents.start("a", ["run", "--standalone", "--nproc-per-node", "1",
                       "--max-restarts", "3", "--restart-backoff", "600",
                       "--retryable-exit-codes", "3", "--no-python", "--",
                       "/bin/sh", "-c", "exit 3"])
    agents.wait_log("a", "restarting the worker group")
    return "while waiting for the restart backoff (10m before restart 1/3)"


def exit_barrier(agents, tmp_path):
    port = free_port()
    conf = "join_timeout=30,exit_barrier_timeout=600"
    agents.start("a", c10d(port, "2", "is_host=1," + conf, "/bin/true"))
    agents.start("b", c10d(port, "2", "is_host=0," + conf,
                           "/bin/sh", "-c", WAIT_FOR_GO))
    agents.wait_log("a", "exit barrier of round")
    return "while waiting for the exit barrier of round 0 (1/2 nodes finished)"


@pytest.mark.parametrize("wait", [dns_wait, start_barrier, rendezvous_join,
                                  last_call, restart_backoff, exit_barrier],
                         ids=lambda f: f.__name__)
def test_sigterm_ends_the_wait(wait, start_agent, tmp_path):
    agents = Agents(start_agent, tmp_path)
    expected = wait(agents, tmp_path)
    code, took = agents.stop("a")
    assert code == 128 + signal.SIGTERM, agents.log("a")
    assert took < 2, agents.log("a")
    message = agents.message("a")
    assert "stopped exit_code=143" in message, message
    assert f"stopped by SIGTERM {expected}" in message, message


def test_no_worker_starts_after_sigterm(start_agent, tmp_path):
    """The last peer arrives right after the stop signal: the round may
    close, but the stopped agent starts no worker."""
    agents = Agents(start_agent, tmp_path)
    port = free_port()
    conf = "join_timeout=30"
    agents.start("a", c10d(port, "2", "is_host=1," + conf,
                           "/bin/sh", "-c", WAIT_FOR_GO))
    agents.wait_log("a", "waiting for nodes to join")
    agents.procs["a"].send_signal(signal.SIGTERM)
    agents.start("b", c10d(port, "2", "is_host=0," + conf,
                           "/bin/sh", "-c", WAIT_FOR_GO))
    assert agents.procs["a"].wait(timeout=20) == 128 + signal.SIGTERM
    assert not (tmp_path / "a.started").exists(), agents.log("a")
    assert "stopped by SIGTERM" in agents.message("a")


def test_join_timeout_holds_without_a_store(start_agent, tmp_path):
    """Each store call waits at most what is left of join_timeout, not
    read_timeout."""
    agents = Agents(start_agent, tmp_path)
    port = free_port()  # nobody listens there
    start = time.monotonic()
    p = agents.start("a", c10d(port, "2",
                               "is_host=0,join_timeout=4,read_timeout=60",
                               "/bin/true"))
    assert p.wait(timeout=30) == 138, agents.log("a")
    assert time.monotonic() - start < 6.5, agents.log("a")


def test_sigterm_ends_the_hosts_wait_for_the_end_to_be_read(start_agent,
                                                            tmp_path):
    """The host ended the job (its worker failed) and waits for the others
    to read why; one of them is frozen, so the wait would last a lease."""
    agents = Agents(start_agent, tmp_path)
    port = free_port()
    conf = "join_timeout=30,keep_alive_interval=5"
    agents.start("a", c10d(port, "2", "is_host=1," + conf, "/bin/sh", "-c",
                           WAIT_FOR_GO + "; exit 1"))
    agents.start("b", c10d(port, "2", "is_host=0," + conf,
                           "/bin/sh", "-c", WAIT_FOR_GO + "; sleep 600"))
    wait_for(lambda: "group rank" in agents.log("a")
             and "group rank" in agents.log("b"), 30, what="the round")
    agents.procs["b"].send_signal(signal.SIGSTOP)
    (tmp_path / "go").write_text("")
    agents.wait_log("a", "for the other nodes to read why the job ended")
    code, took = agents.stop("a")
    # The job's end stays what it was: the worker's permanent failure.
    assert code == 1, agents.log("a")
    assert took < 2, agents.log("a")
    assert ("stopped by SIGTERM while waiting for the other nodes to read why "
            "the job ended") in agents.message("a"), agents.message("a")
