"""Signals and the process tree under `distjob-agent run`: forwarding,
shutdown with a grace period, escaped processes, reaping as PID 1 and as a
subreaper. The agent runs as a plain subprocess (subreaper) and as PID 1
of a new PID namespace, as tini and dumb-init test themselves."""

import os
import signal
import subprocess
import time

import pytest

from harness import (PYTHON, descendants, kill_tree, pid_alive,
                     process_table, spawn, wait_for)

# Catchable asynchronous signals: 1..31 without the synchronous faults
# (which the agent must not block), CHLD, KILL and STOP, then the stop
# signals last (they end the run), plus real-time signals.
SYNCHRONOUS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
               signal.SIGTRAP, signal.SIGSYS}
STOP = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM]
FORWARDED = [s for s in range(1, 32)
             if s not in SYNCHRONOUS | {signal.SIGCHLD, signal.SIGKILL,
                                        signal.SIGSTOP} | set(STOP)]
REALTIME = [signal.SIGRTMIN, signal.SIGRTMIN + 5, signal.SIGRTMAX]

PRINT_SIGNALS = """
import os, signal, sys, time
out = open(sys.argv[1], 'a', buffering=1)
def handler(sig, frame):
    out.write(f'{sig}\\n')
for s in %r:
    signal.signal(s, handler)
out.write('ready\\n')
while True:
    time.sleep(1)
""" % ([int(s) for s in FORWARDED + STOP + REALTIME],)


class Agent:
    """The agent under test, started in the background; always stopped."""

    def __init__(self, agent, args, tmp_path, pid1=False, env=None):
        full_env = dict(os.environ)
        full_env["DISTJOB_TERMINATION_LOG"] = str(tmp_path / "tlog")
        full_env.update(env or {})
        cmd = [agent] + args
        if pid1:
            cmd = ["unshare", "--pid", "--fork", "--mount-proc"] + cmd
        self.stderr_path = tmp_path / "agent.stderr"
        self.proc = spawn(cmd, env=full_env, log=self.stderr_path,
                          stdout=subprocess.DEVNULL)
        self.pid = self.proc.pid
        if pid1:  # the agent is unshare's child
            self.pid = wait_for(lambda: (descendants(self.proc.pid) or [None])[0],
                                10, what="the agent under unshare")

    def signal(self, sig):
        os.kill(self.pid, sig)

    def wait(self, timeout=30):
        return self.proc.wait(timeout=timeout)

    def stderr(self):
        return self.stderr_path.read_text()

    def close(self):
        kill_tree(self.proc)


@pytest.fixture
def start_agent(agent, tmp_path):
    started = []

    def start(args, **kwargs):
        a = Agent(agent, args, tmp_path, **kwargs)
        started.append(a)
        return a
    yield start
    for a in started:
        a.close()


def lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def test_every_forwardable_signal_reaches_the_worker(start_agent, tmp_path):
    out = tmp_path / "signals"
    script = tmp_path / "print_signals.py"
    script.write_text(PRINT_SIGNALS)
    a = start_agent(["run", "--shutdown-timeout", "1", "--no-python", PYTHON,
                     str(script), str(out)])
    wait_for(lambda: "ready" in lines(out), 20, what="worker ready")
    for sig in FORWARDED + REALTIME:
        a.signal(sig)
        wait_for(lambda: str(int(sig)) in lines(out), 5,
                 what=f"worker to see signal {sig}")
    a.signal(signal.SIGTERM)
    assert a.wait() == 128 + signal.SIGTERM
    assert "15" in lines(out)


def test_group_delivery_reaches_a_grandchild(start_agent, tmp_path):
    out = tmp_path / "signals"
    script = tmp_path / "print_signals.py"
    script.write_text(PRINT_SIGNALS)
    # The worker ignores USR1 itself; its child (same group) prints it.
    a = start_agent(["run", "--shutdown-timeout", "1", "--", "sh", "-c",
                     f"trap '' USR1; {PYTHON} {script} {out} & wait"])
    wait_for(lambda: "ready" in lines(out), 20, what="grandchild ready")
    a.signal(signal.SIGUSR1)
    wait_for(lambda: str(int(signal.SIGUSR1)) in lines(out), 5,
             what="grandchild to see SIGUSR1")
    a.signal(signal.SIGTERM)
    assert a.wait() == 143


TRAP_TERM = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], 'w').write('ready')
while True:
    time.sleep(1)
"""


@pytest.mark.parametrize("pid1", [False, True], ids=["subreaper", "pid1"])
def test_term_ignoring_worker_is_killed_at_the_deadline(start_agent, tmp_path,
                                                        pid1):
    ready = tmp_path / "ready"
    script = tmp_path / "trap.py"
    script.write_text(TRAP_TERM)
    a = start_agent(["run", "--shutdown-timeout", "2", "--no-python", PYTHON,
                     str(script), str(ready)], pid1=pid1)
    wait_for(ready.exists, 20, what="worker ready")
    start = time.monotonic()
    a.signal(signal.SIGTERM)
    time.sleep(0.5)
    a.signal(signal.SIGTERM)  # a second one neither resets nor extends
    rc = a.wait()
    elapsed = time.monotonic() - start
    assert 1.8 <= elapsed <= 2.2 + 0.3, elapsed  # ±10 %, plus process exit
    if not pid1:
        assert rc == 143
    assert "grace period over" in a.stderr()


def test_worker_exiting_on_term_gets_no_sigkill(start_agent, tmp_path):
    ready = tmp_path / "ready"
    a = start_agent(["run", "--shutdown-timeout", "20", "--", "sh", "-c",
                     f"touch {ready}; exec sleep 1000"])
    wait_for(ready.exists, 10, what="worker ready")
    start = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.wait() == 143
    assert time.monotonic() - start < 2
    assert "grace period over" not in a.stderr()
    assert "killed" not in a.stderr()
    assert "stopped exit_code=143" in (tmp_path / "tlog").read_text()


def test_grandchild_finishes_its_term_handler_before_the_agent_exits(
        start_agent, tmp_path):
    marker = tmp_path / "marker"
    ready = tmp_path / "ready"
    slow = tmp_path / "slow.py"
    slow.write_text(
        "import signal, sys, time\n"
        "def h(*_):\n"
        "    time.sleep(1)\n"
        "    open(sys.argv[1], 'w').write('done')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, h)\n"
        "open(sys.argv[2], 'w').write('ready')\n"
        "while True: time.sleep(1)\n")
    a = start_agent(["run", "--shutdown-timeout", "10", "--", "sh", "-c",
                     f"{PYTHON} {slow} {marker} {ready} & exec sleep 1000"])
    wait_for(ready.exists, 20, what="grandchild ready")
    a.signal(signal.SIGTERM)
    a.wait()
    assert marker.read_text() == "done"


@pytest.mark.parametrize("pid1", [False, True], ids=["subreaper", "pid1"])
def test_setsid_escapee_is_killed_at_shutdown(start_agent, tmp_path, pid1):
    pidfile = tmp_path / "escapee"
    a = start_agent(["run", "--shutdown-timeout", "3", "--", "sh", "-c",
                     f"setsid sh -c 'trap \"\" TERM; echo $$ > {pidfile}; "
                     f"exec sleep 1000' & exec sleep 1000"], pid1=pid1)
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 10,
             what="escapee started")
    tree = descendants(a.pid)
    assert tree
    a.signal(signal.SIGTERM)
    a.wait()
    for pid in tree:
        assert not pid_alive(pid), pid


ORPHANS = """
import os, sys, time
for i in range(100):
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.2)
            os._exit(0)
        os._exit(0)
    os.waitpid(-1, 0)
open(sys.argv[1], 'w').write(str(os.getpid()))
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
"""


def namespace_pid(pid):
    """`pid` as its own (innermost) PID namespace numbers it; None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def zombies_and_sleepers(agent_pid, worker_pid):
    return [(pid, state) for pid, state, parent in process_table()
            if parent == agent_pid and pid != worker_pid]


@pytest.mark.parametrize("pid1", [False, True], ids=["subreaper", "pid1"])
def test_hundred_orphans_leave_no_zombie(start_agent, tmp_path, pid1):
    spawned, release = tmp_path / "spawned", tmp_path / "release"
    script = tmp_path / "orphans.py"
    script.write_text(ORPHANS)
    a = start_agent(["run", "--no-python", PYTHON, str(script), str(spawned),
                     str(release)], pid1=pid1)
    wait_for(lambda: spawned.exists() and spawned.read_text(), 20,
             what="orphans spawned")
    # The worker by its own pid: the orphans still asleep share its command
    # line, and once pids wrap (pid_max) one may have a lower pid than it.
    own_pid = int(spawned.read_text())
    worker = wait_for(lambda: [p for p in descendants(a.pid)
                               if namespace_pid(p) == own_pid], 10,
                      what="the worker")[0]
    # Every orphan (re-parented to the agent) ends and is reaped, while the
    # worker still runs.
    wait_for(lambda: not zombies_and_sleepers(a.pid, worker), 10,
             what="no zombie or survivor under the agent")
    release.write_text("go")
    assert a.wait() == 0  # an orphan's status is not the worker's


def test_stop_signal_before_workers_start_is_not_lost(start_agent, tmp_path):
    launches = tmp_path / "launches"
    a = start_agent(["run", "--max-restarts", "5", "--restart-backoff", "5",
                     "--", "sh", "-c", f"echo x >> {launches}; exit 200"])
    # Wait for its line, not the file: `>>` creates the file before echo writes, and
    # a TERM in between would leave it empty.
    wait_for(lambda: lines(launches) == ["x"], 10, what="first launch")
    # Now in the 5 s backoff: TERM ends the job without another launch.
    start = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.wait() == 143
    assert time.monotonic() - start < 3
    assert len(lines(launches)) == 1


# grep, not sh: dash clears its signal mask when it starts.
SIG_LINES = ["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]


def test_worker_inherits_the_agents_signal_mask_and_ignores(agent):
    def preexec():
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTIN})
    direct = subprocess.run(SIG_LINES, preexec_fn=preexec,
                            capture_output=True, text=True, timeout=10)
    via = subprocess.run([agent, "run", "--termination-log", "", "--"]
                         + SIG_LINES, preexec_fn=preexec,
                         capture_output=True, text=True, timeout=10)
    assert via.returncode == 0, via.stderr
    assert via.stdout == direct.stdout
    blocked = int(via.stdout.split("SigBlk:")[1].split()[0], 16)
    assert blocked == 1 << (signal.SIGTTIN - 1)


STORM = """
import os, sys
for i in range(1000):
    if os.fork() == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.waitpid(-1, 0)
open(sys.argv[1], 'w').write('done')
while not os.path.exists(sys.argv[2]):
    import time; time.sleep(0.05)
"""


def test_probe_answers_fast_during_an_orphan_storm(start_agent, agent,
                                                   tmp_path):
    done, release = tmp_path / "done", tmp_path / "release"
    script = tmp_path / "storm.py"
    script.write_text(STORM)
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    a = start_agent(["run", "--health-port", str(port), "--no-python",
                     PYTHON, str(script), str(done), str(release)])
    slowest = 0.0
    probes = 0
    while not done.exists() or probes < 5:
        # Signals whose default action is to ignore: the worker may not
        # have set up handlers yet.
        a.signal(signal.SIGURG if probes % 2 else signal.SIGWINCH)
        start = time.monotonic()
        r = subprocess.run([agent, "health", "--port", str(port), "--service",
                            "liveness"], capture_output=True, timeout=10)
        if r.returncode == 0:
            slowest = max(slowest, time.monotonic() - start)
            probes += 1
        assert a.proc.poll() is None, a.stderr()
    assert slowest < 0.5, slowest
    release.write_text("go")
    assert a.wait() == 0


def test_worker_dies_with_a_killed_agent(start_agent, tmp_path):
    pidfile = tmp_path / "pid"
    a = start_agent(["run", "--", "sh", "-c",
                     f"echo $$ > {pidfile}; exec sleep 1000"])
    worker = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(),
                          10, what="worker pid"))
    a.signal(signal.SIGKILL)
    a.wait()
    wait_for(lambda: not pid_alive(worker), 5,
             what="the worker to die with the agent")


@pytest.mark.parametrize("sig", STOP)
def test_each_stop_signal_ends_the_job_without_restart(start_agent, tmp_path,
                                                       sig):
    launches = tmp_path / "launches"
    a = start_agent(["run", "--max-restarts", "5", "--", "sh", "-c",
                     f"echo x >> {launches}; exec sleep 1000"])
    wait_for(launches.exists, 10, what="launch")
    a.signal(sig)
    assert a.wait() == 128 + sig
    assert len(lines(launches)) == 1


def test_zero_shutdown_timeout_from_env_kills_at_once(start_agent, tmp_path):
    ready = tmp_path / "ready"
    a = start_agent(["run", "--", "sh", "-c",
                     f"trap '' TERM; touch {ready}; while :; do sleep 0.1; "
                     "done"], env={"PET_SHUTDOWN_TIMEOUT": "0"})
    wait_for(ready.exists, 10, what="worker ready")
    start = time.monotonic()
    a.signal(signal.SIGTERM)
    assert a.wait() == 143
    assert time.monotonic() - start < 1
