"""Real DDP (gloo, Debian's PyTorch 1.13) whose init_process_group("env://")
connects to the TCPStore group rank 0's agent serves: 2 agents x 2
workers; a worker SIGKILLed mid-training is restarted (--max-restarts 1)
and rejoins through the same store, under the next attempt's prefix
(/worker/attempt_<TORCHELASTIC_RESTART_COUNT>), and training finishes."""

import json
import os
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from harness import (PYTHON, ROOT, descendants, free_port,  # noqa: E402
                     kill_tree, wait_for)

EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"


def torch_available():
    return os.system(f"{PYTHON} -c 'import torch' >/dev/null 2>&1") == 0


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_ddp_restarts_through_the_agents_store(agent, tmp_path):
    port = free_port()
    ckpt = tmp_path / "model.pt"
    # Each worker notes its attempt and store before training.
    wrapper = ('echo "$TORCHELASTIC_RESTART_COUNT $MASTER_ADDR:$MASTER_PORT '
               '$TORCHELASTIC_USE_AGENT_STORE" >> "$0/env.$RANK"; '
               'exec "$@"')
    procs = []
    try:
        for i in range(2):
            env = dict(os.environ,
                       DISTJOB_TERMINATION_LOG=str(tmp_path / f"t{i}"))
            procs.append(subprocess.Popen(
                [agent, "run", "--nnodes", "2", "--nproc-per-node", "2",
                 "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"127.0.0.1:{port}",
                 "--rdzv-id", "store", "--rdzv-conf",
                 f"is_host={1 if i == 0 else 0}",
                 "--local-addr", f"127.0.0.{i + 1}", "--max-restarts", "1",
                 "--no-python", "sh", "-c", wrapper, str(tmp_path),
                 PYTHON, str(EXAMPLE), "--epochs", "8",
                 "--checkpoint", str(ckpt), "--out",
                 str(tmp_path)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True))
        # Mid-training: once rank 0 saved an epoch, kill one of the second
        # agent's workers.
        wait_for(ckpt.exists, timeout=120, what="the first checkpoint")
        victims = [p for p in descendants(procs[1].pid)
                   if str(EXAMPLE).encode() in cmdline(p)]
        assert victims
        os.kill(victims[0], signal.SIGKILL)
        outs = [p.communicate(timeout=180)[0] for p in procs]
        for p, out in zip(procs, outs):
            assert p.returncode == 0, out[-3000:]
    finally:
        for p in procs:
            kill_tree(p)
    seen = [line.split() for rank in range(4)
            for line in (tmp_path / f"env.{rank}").read_text().splitlines()]
    # Both attempts ran, every worker a client of one store, never moved.
    assert {s[0] for s in seen} == {"0", "1"}, seen
    assert {s[2] for s in seen} == {"True"}, seen
    assert len({s[1] for s in seen}) == 1, seen
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text())
             for i in range(4)]
    assert {r["world_size"] for r in ranks} == {4}
    assert len({r["digest"] for r in ranks}) == 1
    # The second attempt resumed from the checkpoint, not from scratch.
    assert all(r["start_epoch"] > 0 for r in ranks), ranks
    assert "restart" in outs[1].lower()
