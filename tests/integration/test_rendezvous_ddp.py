"""The real PyTorch DDP example across 2 agents x 2 workers (gloo), over
the elastic c10d rendezvous on loopback."""


import pytest


from harness import (DDP_EXAMPLE, PYTHON, Background,
                     ddp_ranks, finish_ddp_agents, start_ddp_agents,
                     torch_available)


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_ddp_across_two_agents(agent, tmp_path):
    with Background() as background:
        procs = start_ddp_agents(
            background, agent, tmp_path, "ddp",
            ["--", PYTHON, str(DDP_EXAMPLE), "--epochs", "6", "--out",
             str(tmp_path)])
        finish_ddp_agents(procs, timeout=300)
    ranks = ddp_ranks(tmp_path, 4)
    assert ranks[0]["losses"][-1] < ranks[0]["losses"][0]
