"""OOM detection: a worker killed by the kernel's OOM killer in a child
memory cgroup with a small limit is reported as such (oom=true), while a
`kill -9` from outside is not. Skipped, with the reason, where no memory
cgroup can be created."""

import os
import pathlib
import signal
import subprocess
import uuid

import pytest

from harness import PYTHON, descendants, wait_for

LIMIT = 200 * 1024 * 1024

HOG = """
chunks = []
while True:
    chunks.append(bytearray(16 * 1024 * 1024))
"""


def own_memory_cgroup():
    """(directory of our memory cgroup, 'v1' or 'v2'), or a skip reason."""
    for line in pathlib.Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            for d in (pathlib.Path("/sys/fs/cgroup/memory" + path),
                      pathlib.Path("/sys/fs/cgroup/memory")):
                if (d / "memory.limit_in_bytes").exists():
                    return d, "v1"
    root = pathlib.Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists() and \
            "memory" in (root / "cgroup.controllers").read_text():
        return root, "v2"
    return None, "no writable memory cgroup controller on this machine"


@pytest.fixture
def memory_cgroup():
    parent, kind = own_memory_cgroup()
    if parent is None:
        pytest.skip(kind)
    child = parent / f"distjob-oom-test-{uuid.uuid4().hex[:8]}"
    try:
        child.mkdir()
        if kind == "v1":
            (child / "memory.limit_in_bytes").write_text(str(LIMIT))
            swap = child / "memory.memsw.limit_in_bytes"
            if swap.exists():
                swap.write_text(str(LIMIT))
        else:
            (child / "memory.max").write_text(str(LIMIT))
            (child / "memory.swap.max").write_text("0")
    except OSError as e:
        if child.exists():
            child.rmdir()
        pytest.skip(f"cannot create a child memory cgroup: {e}")
    yield child
    procs = child / "cgroup.procs"
    for pid in procs.read_text().split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_for(lambda: not procs.read_text().split(), 10,
             what="cgroup empty")
    child.rmdir()


def test_oom_kill_is_reported(agent, memory_cgroup, tmp_path):
    tlog = tmp_path / "tlog"
    r = subprocess.run(
        ["sh", "-c", f'echo $$ > {memory_cgroup}/cgroup.procs && exec "$@"',
         "sh", agent, "run", "--no-python", PYTHON, "-c", HOG],
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tlog)),
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 137, r.stderr
    message = tlog.read_text()
    assert len(message.encode()) <= 4096
    assert message.startswith("distjob-agent: retryable exit_code=137 "
                              "restarts=0/0 oom=true hang=false\n"), message
    assert "OOM killer" in message


def test_external_kill_9_is_not_an_oom(agent, tmp_path):
    tlog = tmp_path / "tlog"
    ready = tmp_path / "ready"
    p = subprocess.Popen(
        [agent, "run", "--", "sh", "-c", f"touch {ready}; exec sleep 1000"],
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tlog)),
        stderr=subprocess.PIPE, text=True)
    try:
        wait_for(ready.exists, 10, what="worker ready")
        worker = wait_for(lambda: descendants(p.pid), 5)[0]
        os.kill(worker, signal.SIGKILL)
        assert p.wait(timeout=20) == 137
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    message = tlog.read_text()
    assert "oom=false" in message
    assert "signal=SIGKILL" in message
