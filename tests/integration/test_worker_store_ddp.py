"""Real DDP (gloo, Debian's PyTorch 1.13) whose init_process_group("env://")
connects to the TCPStore group rank 0's agent serves: 2 agents x 2
workers; a worker SIGKILLed mid-training is restarted (--max-restarts 1)
and rejoins through the same store, under the next attempt's prefix
(/worker/attempt_<TORCHELASTIC_RESTART_COUNT>), and training finishes."""

import os
import signal

import pytest


from harness import (DDP_EXAMPLE, PYTHON, Background,
                     ddp_ranks, descendants, finish_ddp_agents,
                     start_ddp_agents, torch_available, wait_for)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_ddp_restarts_through_the_agents_store(agent, tmp_path):
    ckpt = tmp_path / "model.pt"
    # Each worker notes its attempt and store before training.
    wrapper = ('echo "$TORCHELASTIC_RESTART_COUNT $MASTER_ADDR:$MASTER_PORT '
               '$TORCHELASTIC_USE_AGENT_STORE" >> "$0/env.$RANK"; '
               'exec "$@"')
    with Background() as background:
        procs = start_ddp_agents(
            background, agent, tmp_path, "store",
            ["--no-python", "sh", "-c", wrapper, str(tmp_path), PYTHON,
             str(DDP_EXAMPLE), "--epochs", "8", "--checkpoint", str(ckpt),
             "--out", str(tmp_path)],
            flags=["--max-restarts", "1"])
        # Mid-training: once rank 0 saved an epoch, kill one of the second
        # agent's workers.
        wait_for(ckpt.exists, timeout=120, what="the first checkpoint")
        victims = [p for p in descendants(procs[1].pid)
                   if str(DDP_EXAMPLE).encode() in cmdline(p)]
        assert victims
        os.kill(victims[0], signal.SIGKILL)
        outs = finish_ddp_agents(procs, timeout=180)
    seen = [line.split() for rank in range(4)
            for line in (tmp_path / f"env.{rank}").read_text().splitlines()]
    # Both attempts ran, every worker a client of one store, never moved.
    assert {s[0] for s in seen} == {"0", "1"}, seen
    assert {s[2] for s in seen} == {"True"}, seen
    assert len({s[1] for s in seen}) == 1, seen
    ranks = ddp_ranks(tmp_path, 4)
    # The second attempt resumed from the checkpoint, not from scratch.
    assert all(r["start_epoch"] > 0 for r in ranks), ranks
    assert "restart" in outs[1].lower()
