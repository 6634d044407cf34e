"""Real PyTorch training (Debian's python3-torch, gloo) inside namespace
pods, one standalone job per pod: the groundwork the multi-node scenarios
stand on (torch and gloo work with a pod's hostname, /etc and network)."""

import json
import os
import subprocess

import pytest

from harness import PYTHON, ROOT, wait_for

EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"
GRACE = 15


def torch_available():
    return os.path.exists(PYTHON) and subprocess.run(
        [PYTHON, "-c", "import torch.distributed"],
        capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not torch_available(),
                                reason="Debian's python3-torch is missing")


def test_ddp_trains_inside_a_pod(make_cluster, artifacts):
    c = make_cluster("ddp", {"worker": 1})
    out = artifacts / "ranks"
    out.mkdir()
    pod = c.start_pod("worker", 0,
                      ["run", "--standalone", "--nproc-per-node", "2", "--",
                       PYTHON, str(EXAMPLE), "--epochs", "3", "--out",
                       str(out)])
    r = pod.wait(timeout=120)
    assert r.exit_code == 0, (r.stderr[-2000:], r.artifacts)
    ranks = [json.loads((out / f"rank{i}.json").read_text())
             for i in range(2)]
    assert [x["world_size"] for x in ranks] == [2, 2]
    assert ranks[0]["digest"] == ranks[1]["digest"]
    assert c.leftover_processes() == {}


def test_sigterm_during_ddp_training(make_cluster, artifacts):
    c = make_cluster("ddpterm", {"master": 1, "worker": 1})
    pods = c.start_all(
        lambda pod: ["run", "--standalone", "--nproc-per-node", "2",
                     "--shutdown-timeout", str(GRACE), "--", PYTHON,
                     str(EXAMPLE), "--epochs", "100000", "--checkpoint",
                     str(artifacts / f"{pod.name}.pt")])
    for pod in pods:
        c.mark_ready(pod)
    # Training, not starting up: each job has checkpointed an epoch.
    wait_for(lambda: all((artifacts / f"{p.name}.pt").exists()
                         for p in pods), 120, interval=0.1,
             what="a checkpoint from every pod")
    c.stop_all_within(pods, GRACE, slack=10)
    assert c.leftover_processes() == {}
