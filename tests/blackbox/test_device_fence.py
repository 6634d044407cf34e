"""The GPU-release fence (docs/supervision.md, "Device release"): before a
restart, a process of the previous attempt that still holds an
accelerator's device file is killed and waited for, its pid and path
logged. A fake device (--device-files) stands for /dev/nvidia*."""

import ctypes
import json
import os
import signal

from harness import PYTHON, log_time, wait_for

# Each attempt leaves launch-<n>; attempt 0 hands its environment to the
# test, waits until a holder started from it has the fake device open,
# then fails; attempt 1 succeeds.
WORKER = """
import json, os, sys, time
d = sys.argv[1]
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(d, "launch-" + attempt), "w").close()
if attempt != "0":
    sys.exit(0)
with open(os.path.join(d, "env.tmp"), "w") as f:
    json.dump(dict(os.environ), f)
os.rename(os.path.join(d, "env.tmp"), os.path.join(d, "env.json"))
deadline = time.monotonic() + 30
while not os.path.exists(os.path.join(d, "held")):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.01)
sys.exit(200)
"""

# Holds the device open until killed; says so once it does.
HOLDER = """
import os, sys, time
f = open(sys.argv[1], "rb")
open(sys.argv[2], "w").close()
while True:
    time.sleep(1)
"""


def test_a_straggler_holding_the_device_is_killed_before_the_restart(
        start_agent, background, tmp_path):
    device = tmp_path / "fake-gpu0"
    device.write_text("")
    log = tmp_path / "agent.log"
    proc = start_agent(["run", "--max-restarts", "1",
                        "--device-files", str(tmp_path / "fake-gpu*"),
                        "--device-release-timeout", "20",
                        "--no-python", PYTHON, "-c", WORKER, str(tmp_path)],
                       log=str(log))
    env_file = tmp_path / "env.json"
    wait_for(env_file.exists, 30, what="attempt 0's environment")
    # A process of the attempt that the drain does not reach (here one
    # outside the agent's tree, as `kubectl exec` starts them) but that
    # carries the attempt's environment.
    holder = background.start(
        [PYTHON, "-c", HOLDER, str(device), str(tmp_path / "held")],
        env=json.loads(env_file.read_text()), start_new_session=True)
    assert proc.wait(timeout=60) == 0, log.read_text()
    assert holder.wait(timeout=10) == -signal.SIGKILL
    text = log.read_text()
    assert (f"pid {holder.pid} of the previous attempt still holds "
            f"{device}") in text, text
    assert "released the devices" in text, text


# Attempt 0 starts a grandchild that escapes the group as DataLoader
# stragglers and daemons do (double fork + setsid: re-parented to the
# agent, no longer the worker's descendant), holds the fake device and
# ignores SIGTERM; once it says so, the worker crashes. Attempt 1 records
# what it sees of the grandchild.
ESCAPING_WORKER = """
import os, signal, sys, time
d, device = sys.argv[1], sys.argv[2]
straggler = os.path.join(d, "straggler")
if os.environ["TORCHELASTIC_RESTART_COUNT"] != "0":
    pid = open(straggler).read().split()[0]
    try:
        with open(f"/proc/{pid}/stat") as f:
            seen = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        seen = "gone"
    open(os.path.join(d, "seen"), "w").write(seen)
    sys.exit(0)
agent = os.getppid()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        held = open(device, "rb")
        deadline = time.monotonic() + 30
        while os.getppid() != agent:
            if time.monotonic() > deadline:
                os._exit(3)
            time.sleep(0.01)
        with open(straggler + ".tmp", "w") as f:
            f.write(f"{os.getpid()} {os.getppid()}")
        os.rename(straggler + ".tmp", straggler)
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
deadline = time.monotonic() + 30
while not os.path.exists(straggler):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.01)
os.abort()
"""


def test_an_escaped_grandchild_holding_the_device_is_killed_first(
        start_agent, tmp_path):
    """The issue's straggler: a grandchild that escaped the worker's group
    (double fork + setsid), holds the device, ignores SIGTERM, and outlives
    the crashed worker. The agent is its subreaper, so the drain after the
    attempt reaches it: SIGTERM, then SIGKILL at the end of the grace period
    (--shutdown-timeout), naming its pid and the device it held. By the
    time the fence looks, it is gone, so the fence has nothing to kill
    here; the fence's own kill of a holder the drain cannot reach is the
    first test above. It ignores SIGTERM and never exits on its own: gone
    means killed by SIGKILL."""
    device = tmp_path / "fake-gpu3"
    device.write_text("")
    log = tmp_path / "agent.log"
    proc = start_agent(["run", "--max-restarts", "1", "--shutdown-timeout",
                        "2", "--device-files", str(tmp_path / "fake-gpu*"),
                        "--no-python", PYTHON, "-c", ESCAPING_WORKER,
                        str(tmp_path), str(device)],
                       log=str(log))
    assert proc.wait(timeout=60) == 0, log.read_text()
    text = log.read_text()
    pid, parent = (tmp_path / "straggler").read_text().split()
    # Re-parented to the agent: no longer a descendant of the worker.
    assert int(parent) == proc.pid, (parent, proc.pid)
    # The next attempt started only once it was gone (reaped, not a zombie).
    assert (tmp_path / "seen").read_text() == "gone"
    killed = [line for line in text.splitlines()
              if "leftover process(es) still running at the deadline" in line]
    assert killed and f"pid {pid} (python3) holding {device}" in killed[0], text
    assert "still holds" not in text, text


def test_an_unrelated_holder_is_left_alone(start_agent, background,
                                           tmp_path):
    device = tmp_path / "fake-gpu1"
    device.write_text("")
    ready = tmp_path / "held"
    # Not started by the agent and without its marker: another job's.
    other = background.start([PYTHON, "-c", HOLDER, str(device), str(ready)])
    wait_for(ready.exists, 30, what="the other holder")
    side = tmp_path / "launches"
    proc = start_agent(["run", "--max-restarts", "1",
                        "--device-files", str(tmp_path / "fake-gpu*"),
                        "--", "sh", "-c",
                        f'echo x >> {side}; [ "$(wc -l < {side})" -eq 2 ] '
                        "|| exit 200"], log=str(tmp_path / "agent.log"))
    assert proc.wait(timeout=60) == 0, (tmp_path / "agent.log").read_text()
    assert other.poll() is None


def test_bad_fence_flags_are_exit_2_naming_the_flag(run_agent):
    """Each bad value exits 2 at once with one line naming its flag."""
    for args, flag in [
            (["--device-release-timeout-action", "later"],
             "--device-release-timeout-action"),
            (["--device-files", ","], "--device-files"),
            (["--device-release-timeout", "-1"], "--device-release-timeout")]:
        r = run_agent(["run", *args, "--", "true"])
        assert r.returncode == 2, (args, r.stderr)
        assert flag in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)


PR_CAPBSET_DROP = 24
CAP_KILL = 5
NOBODY = 65534


def _without_cap_kill():
    """Runs in the agent's child before exec: the agent (root) loses
    CAP_KILL, as in a pod whose securityContext drops it, and may then
    signal only processes of its own user."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_KILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _start_holder_agent_cannot_kill(start_agent, background, tmp_path,
                                    action):
    """An agent without CAP_KILL whose attempt 0 fails while a process of
    another user (nobody), outside the agent's tree and carrying the
    attempt's environment, holds the fake device: the fence finds it
    (root still reads every /proc/<pid>/fd) and cannot kill it, as it
    could not kill a process in uninterruptible sleep. Returns the agent,
    the holder, the device and the agent's log."""
    device = tmp_path / "fake-gpu4"
    device.write_text("")
    log = tmp_path / "agent.log"
    args = ["run", "--max-restarts", "1",
            "--device-files", str(tmp_path / "fake-gpu*"),
            "--device-release-timeout", "2"]
    if action is not None:
        args += ["--device-release-timeout-action", action]
    proc = start_agent(args + ["--no-python", PYTHON, "-c", WORKER,
                               str(tmp_path)],
                       log=str(log), preexec_fn=_without_cap_kill)
    env_file = tmp_path / "env.json"
    wait_for(env_file.exists, 30, what="attempt 0's environment")
    env = json.loads(env_file.read_text())
    # Opened here and inherited: nobody cannot open a file under tmp_path.
    fd = os.open(device, os.O_RDONLY)
    try:
        holder = background.start(
            [PYTHON, "-c", "import time\nwhile True: time.sleep(1)"],
            env=env, pass_fds=(fd,), user=NOBODY, group=NOBODY,
            extra_groups=[], start_new_session=True)
    finally:
        os.close(fd)
    marker = "DISTJOB_AGENT_INSTANCE=" + env["DISTJOB_AGENT_INSTANCE"]

    def exec_done():
        with open(f"/proc/{holder.pid}/environ", "rb") as f:
            return marker.encode() in f.read().split(b"\0")
    wait_for(exec_done, 30, what="the holder's exec")
    (tmp_path / "held").touch()
    return proc, holder, device, log


def test_stop_action_exits_retryable_naming_the_holder(
        start_agent, background, tmp_path):
    """--device-release-timeout-action stop: past the timeout the agent
    exits 138 (retryable) within a second, names the holder's pid and
    path, and starts no next attempt."""
    proc, holder, device, log = _start_holder_agent_cannot_kill(
        start_agent, background, tmp_path, "stop")
    assert proc.wait(timeout=60) == 138, log.read_text()
    text = log.read_text()
    assert f"cannot kill pid {holder.pid}" in text, text
    # Both ends from the agent's own clock: its closing summary line.
    took = (log_time(text, "distjob-agent: retryable exit_code=138")
            - log_time(text, f"pid {holder.pid} of the previous attempt"))
    assert 2 <= took < 3, (took, text)
    held = f"pid {holder.pid} holds {device}"
    assert held in (tmp_path / "termination-log").read_text()
    assert not (tmp_path / "launch-1").exists()
    assert holder.poll() is None  # it was never the agent's to kill


def test_default_action_starts_the_attempt_with_a_warning(
        start_agent, background, tmp_path):
    """The default (start): past the timeout the attempt starts anyway,
    with a warning naming the holder's pid and path."""
    proc, holder, device, log = _start_holder_agent_cannot_kill(
        start_agent, background, tmp_path, None)
    assert proc.wait(timeout=60) == 0, log.read_text()
    text = log.read_text()
    warning = [line for line in text.splitlines()
               if "starting the attempt anyway" in line]
    assert warning and f"pid {holder.pid} holds {device}" in warning[0], text
    waited = (log_time(text, "starting the attempt anyway")
              - log_time(text, f"pid {holder.pid} of the previous attempt"))
    assert waited >= 2, (waited, text)
    assert (tmp_path / "launch-1").exists()
