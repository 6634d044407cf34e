"""The README's main job: the DDP example trained through the agent."""

import json
import os

import pytest

from harness import PYTHON, ROOT

EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"


def torch_available():
    return os.path.exists(PYTHON) and os.system(
        f"{PYTHON} -c 'import torch' >/dev/null 2>&1") == 0


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_ddp_two_workers_identical_parameters_falling_loss(run_agent,
                                                           tmp_path):
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2", "--",
                   PYTHON, str(EXAMPLE), "--epochs", "8", "--out",
                   str(tmp_path)], timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text())
             for i in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert ranks[0]["digest"] == ranks[1]["digest"]
    losses = ranks[0]["losses"]
    assert len(losses) == 8
    assert losses[-1] < losses[0] / 10
