"""The agent as PID 1 when its own output goes nowhere: a log reader that
went away (a broken pipe) or one that never reads (a full pipe). Neither
may reach the workers, spin the agent or keep it alive past its grace
period. The agent runs as PID 1 of a new PID namespace, as in a pod."""

import os
import signal
import subprocess

import pytest

from harness import PYTHON, descendants, kill_tree, wait_for

# Records every SIGPIPE it gets (Python ignores SIGPIPE unless told).
RECORD_SIGPIPE = """
import os, signal, sys, time
out = open(sys.argv[1], 'a', buffering=1)
signal.signal(signal.SIGPIPE, lambda s, f: out.write('SIGPIPE\\n'))
signal.signal(signal.SIGUSR1, lambda s, f: out.write('SIGUSR1\\n'))
def stop(s, f):
    # Cleans up for a moment, as a real worker would: a signal the agent
    # sends after its stop signal still reaches it.
    out.write('SIGTERM\\n')
    time.sleep(1)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
out.write('ready\\n')
while True:
    time.sleep(1)
"""


def lines(path):
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


class Pid1Agent:
    """`distjob-agent ARGS` as PID 1 of a new PID namespace, its stdout and
    stderr given by the caller; always killed with its tree."""

    def __init__(self, agent, args, tmp_path, stdout, stderr):
        env = dict(os.environ)
        env["DISTJOB_TERMINATION_LOG"] = str(tmp_path / "tlog")
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", agent] + args,
            env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        self.pid = wait_for(lambda: (descendants(self.proc.pid) or [None])[0],
                            10, what="the agent under unshare")

    def close(self):
        kill_tree(self.proc)


@pytest.fixture
def pid1_agent(agent, tmp_path):
    started = []

    def start(args, stdout, stderr):
        a = Pid1Agent(agent, args, tmp_path, stdout, stderr)
        started.append(a)
        return a
    yield start
    for a in started:
        a.close()


def broken_pipe():
    """The write end of a pipe whose reader is already gone."""
    r, w = os.pipe()
    os.close(r)
    return w


@pytest.mark.parametrize("level", ["debug", "info"])
def test_dead_log_reader_neither_spins_nor_reaches_workers(
        pid1_agent, tmp_path, level):
    record = tmp_path / "signals"
    script = tmp_path / "w.py"
    script.write_text(RECORD_SIGPIPE)
    w = broken_pipe()
    try:
        a = pid1_agent(["run", "--log-level", level, "--shutdown-timeout",
                        "5", "--no-python", PYTHON, str(script),
                        str(record)], stdout=w, stderr=w)
    finally:
        os.close(w)
    wait_for(lambda: "ready" in lines(record), 20, what="the worker")
    # A forwarded signal is logged (at debug): that write fails with EPIPE
    # and raises the agent's own SIGPIPE.
    os.kill(a.pid, signal.SIGUSR1)
    wait_for(lambda: "SIGUSR1" in lines(record), 10, what="SIGUSR1 forwarded")
    # The agent still supervises: the next signal is forwarded too.
    os.kill(a.pid, signal.SIGUSR1)
    wait_for(lambda: lines(record).count("SIGUSR1") == 2, 10,
             what="the second SIGUSR1 forwarded")
    os.kill(a.pid, signal.SIGTERM)
    assert a.proc.wait(timeout=15) == 128 + signal.SIGTERM
    assert "SIGPIPE" not in lines(record)


FLOOD = """
import sys, time
line = b'x' * 99 + b'\\n'
for _ in range(%d):
    sys.stdout.buffer.write(line * 1000)
sys.stdout.flush()
while True:
    time.sleep(1)
"""


def test_console_nobody_reads_does_not_outlive_the_grace_period(
        pid1_agent, tmp_path):
    logs = tmp_path / "logs"
    script = tmp_path / "w.py"
    script.write_text(FLOOD % 200)  # 20 MB, far more than a pipe holds
    r, w = os.pipe()  # held open, never read: a stuck log collector
    try:
        a = pid1_agent(["run", "--tee", "3", "--log-dir", str(logs),
                        "--shutdown-timeout", "2", "--no-python", PYTHON,
                        str(script)], stdout=w, stderr=w)
        os.close(w)
        out = logs / "attempt_0" / "0" / "stdout.log"
        # The copy keeps draining the worker into its file while the
        # console is full: the worker is not blocked by the agent.
        wait_for(lambda: out.exists() and out.stat().st_size >= 20_000_000,
                 30, what="the whole flood in stdout.log")
        os.kill(a.pid, signal.SIGTERM)
        assert a.proc.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        os.close(r)


PROGRESS = """
import os, sys, time
sys.stdout.write('\\rprogress 1')
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
sys.stdout.write('\\rprogress 2\\n')
"""


def test_carriage_return_progress_reaches_console_and_file_as_it_comes(
        start_agent, tmp_path):
    logs = tmp_path / "logs"
    go = tmp_path / "go"
    script = tmp_path / "w.py"
    script.write_text(PROGRESS)
    proc = start_agent(["run", "--tee", "3", "--log-dir", str(logs),
                        "--no-python", PYTHON, str(script), str(go)],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    os.set_blocking(proc.stdout.fileno(), False)
    seen = b""

    def console_has(text):
        nonlocal seen
        try:
            seen += os.read(proc.stdout.fileno(), 65536) or b""
        except BlockingIOError:
            pass
        return text in seen
    wait_for(lambda: console_has(b"\r[default0]:progress 1"), 20,
             what="the progress line on the console")
    out = logs / "attempt_0" / "0" / "stdout.log"
    assert out.read_bytes() == b"\rprogress 1"
    go.touch()
    assert proc.wait(timeout=20) == 0
    os.set_blocking(proc.stdout.fileno(), True)
    seen += proc.stdout.read()
    assert seen.endswith(b"\r[default0]:progress 2\n"), seen
    assert out.read_bytes() == b"\rprogress 1\rprogress 2\n"


def test_full_disk_under_log_dir_is_reported_once(agent, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    script = tmp_path / "w.py"
    script.write_text("import sys\n"
                      "for i in range(20000):\n"
                      "    print('line', i, 'x' * 90)\n")
    # A 256 KiB tmpfs in a private mount namespace: 2 MB do not fit.
    r = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"', str(logs),
         agent, "run", "--tee", "3", "--log-dir", str(logs), "--no-python",
         PYTHON, str(script)],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / "tlog")))
    assert r.returncode == 0, r.stderr
    # The console still has every line; the cut file is said once.
    assert r.stdout.count("[default0]:line ") == 20000
    assert r.stderr.count("No space left on device") == 1, r.stderr
    assert "stdout.log" in r.stderr


def test_huge_line_without_newline_is_cheap(agent, tmp_path):
    logs = tmp_path / "logs"
    script = tmp_path / "w.py"
    # 100 MB with no newline at all, a megabyte at a time.
    script.write_text("import sys\n"
                      "for _ in range(100):\n"
                      "    sys.stdout.buffer.write(b'x' * (1 << 20))\n")
    # GNU time starts the agent and reports its peak (its waited worker's
    # included). Not this process's wait4: a child forked from pytest counts
    # pytest's own pages until it execs, and pytest holds torch when a module
    # that imports it was collected.
    peak = tmp_path / "peak"
    r = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(peak), agent, "run", "--tee",
         "3", "--log-dir", str(logs), "--no-python", PYTHON, str(script)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / "tlog")))
    assert r.returncode == 0
    # The line buffer is bounded (it once grew to three times the line).
    max_rss_kib = int(peak.read_text().split()[-1])
    assert max_rss_kib < 100 * 1024, max_rss_kib
    assert (logs / "attempt_0" / "0" / "stdout.log").stat().st_size == 100 << 20
