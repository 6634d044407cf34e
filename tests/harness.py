"""Helpers for tests of the built agent: locate it, wait for conditions
with a deadline (never a fixed sleep), inspect the process tree."""

import os
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Debian's interpreter: the one that has python3-torch.
PYTHON = "/usr/bin/python3"


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


def pid_alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def descendants(pid):
    """All live descendants of `pid`, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
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
