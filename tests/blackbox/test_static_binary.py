"""The agent is one static, stripped executable that needs nothing from the
image: it runs in an otherwise empty root."""

import os
import shutil
import subprocess

import pytest

MAX_BYTES = 15 * 1000 * 1000  # "at most 15 MB", decimal: the stricter reading


def test_static_stripped_and_small(agent):
    info = subprocess.run(["file", "-L", agent], capture_output=True,
                          text=True, check=True).stdout
    assert "statically linked" in info
    assert "x86-64" in info
    assert "stripped" in info and "not stripped" not in info
    ldd = subprocess.run(["ldd", agent], capture_output=True, text=True)
    assert "not a dynamic executable" in (ldd.stdout + ldd.stderr)
    assert os.path.getsize(agent) <= MAX_BYTES


def test_runs_in_an_empty_root(agent, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("chroot needs root")
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        pytest.skip("busybox-static is not installed")
    root = tmp_path / "root"
    (root / "bin").mkdir(parents=True)
    shutil.copy(agent, root / "distjob-agent")
    shutil.copy(busybox, root / "bin" / "busybox")
    os.symlink("busybox", root / "bin" / "sh")
    # Nothing else: no libc, no /etc, no /proc, no /dev.
    r = subprocess.run(
        [shutil.which("chroot") or "/usr/sbin/chroot", str(root), "/distjob-agent", "run", "--standalone",
         "--nproc-per-node", "2", "--termination-log", "/termination-log",
         "--", "/bin/sh", "-c",
         "echo rank=$RANK world=$WORLD_SIZE; exit $LOCAL_RANK"],
        capture_output=True, text=True, timeout=30,
        env={"PATH": "/bin"})
    assert "rank=0 world=2" in r.stdout, r.stderr
    assert "rank=1 world=2" in r.stdout
    assert r.returncode == 1  # local rank 1 exited 1: the worker's code
