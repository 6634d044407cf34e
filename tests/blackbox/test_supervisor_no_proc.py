"""Without /proc the agent cannot see a process that left its worker's
process group (setsid): it says so at start instead of letting such a
process survive silently."""

import os
import subprocess

import pytest


@pytest.mark.parametrize("pid1", [False, True])
def test_missing_proc_is_warned_at_start(agent, tmp_path, pid1):
    # An empty tmpfs over /proc, in a private mount namespace.
    ns = ["unshare", "--mount", "--propagation", "private"]
    if pid1:
        ns[1:1] = ["--pid", "--fork"]
    r = subprocess.run(
        ns + ["sh", "-c", 'mount -t tmpfs none /proc && exec "$@"', "sh",
              agent, "run", "--", "sh", "-c", "echo worker ran"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / "tlog")))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "worker ran\n"
    warnings = [line for line in r.stderr.splitlines()
                if "/proc is not mounted" in line]
    assert len(warnings) == 1, r.stderr
    assert "setsid" in warnings[0]
    # Said before the worker started, not at the end.
    assert r.stderr.index("/proc is not mounted") < r.stderr.index("success")
