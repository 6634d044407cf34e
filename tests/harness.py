"""Helpers for tests of the built agent: locate it, wait for conditions
with a deadline (never a fixed sleep), inspect the process tree, start
agents in the background and find free ports."""

import os
import pathlib
import socket
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Debian's interpreter: the one that has python3-torch.
PYTHON = "/usr/bin/python3"


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


def free_ports(n, host="127.0.0.1"):
    """`n` distinct free TCP ports on `host`: all bound at once, then
    released, so no two are the same."""
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

    def start(self, argv, env=None, log=None, **kwargs):
        proc = spawn(argv, env=env, log=log, **kwargs)
        self.procs.append(proc)
        return proc

    def close(self):
        for proc in self.procs:
            kill_tree(proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
