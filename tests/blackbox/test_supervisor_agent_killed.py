"""A non-PID-1 agent killed with SIGKILL: its workers die of
PR_SET_PDEATHSIG, and the guard process (supervisor/tree_guard.h) ends
what they started in their process groups, so nothing trains on
unsupervised."""

import os
import signal

from harness import pid_alive, wait_for

# Each worker starts a grandchild (in its own process group) and waits.
WORKER = ('sleep 600 & echo $! > "$0.$LOCAL_RANK"; '
          'echo ready > "$1.$LOCAL_RANK"; wait')


def test_sigkilled_agent_leaves_no_grandchild(start_agent, tmp_path):
    pids, ready = tmp_path / "grandchild", tmp_path / "ready"
    proc = start_agent(["run", "--nproc-per-node", "2", "--", "sh", "-c",
                        WORKER, str(pids), str(ready)])
    for rank in (0, 1):
        wait_for(lambda: os.path.exists(f"{ready}.{rank}"), 20,
                 what=f"worker {rank}")
    grandchildren = [int(open(f"{pids}.{rank}").read()) for rank in (0, 1)]
    try:
        assert all(pid_alive(p) for p in grandchildren)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        wait_for(lambda: not any(pid_alive(p) for p in grandchildren), 10,
                 what="the workers' children to die with the agent")
    finally:
        for p in grandchildren:  # survivors are no longer the agent's
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)
