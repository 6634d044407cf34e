"""The real PyTorch DDP example across 2 agents x 2 workers (gloo), over
the elastic c10d rendezvous on loopback."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from harness import PYTHON, ROOT, free_port, kill_tree  # noqa: E402

EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"


def torch_available():
    return os.system(f"{PYTHON} -c 'import torch' >/dev/null 2>&1") == 0


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_ddp_across_two_agents(agent, tmp_path):
    port = free_port()
    procs = []
    try:
        for i in range(2):
            env = dict(os.environ,
                       DISTJOB_TERMINATION_LOG=str(tmp_path / f"t{i}"))
            procs.append(subprocess.Popen(
                [agent, "run", "--nnodes", "2", "--nproc-per-node", "2",
                 "--rdzv-backend", "c10d",
                 "--rdzv-endpoint", f"127.0.0.1:{port}",
                 "--rdzv-id", "ddp", "--rdzv-conf",
                 f"is_host={1 if i == 0 else 0}",
                 "--local-addr", f"127.0.0.{i + 1}", "--",
                 PYTHON, str(EXAMPLE), "--epochs", "6", "--out",
                 str(tmp_path)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True))
        outs = [p.communicate(timeout=300)[0] for p in procs]
        for p, out in zip(procs, outs):
            assert p.returncode == 0, out[-3000:]
    finally:
        for p in procs:
            kill_tree(p)
    ranks = [json.loads((tmp_path / f"rank{i}.json").read_text())
             for i in range(4)]
    assert {r["world_size"] for r in ranks} == {4}
    assert len({r["digest"] for r in ranks}) == 1
    assert ranks[0]["losses"][-1] < ranks[0]["losses"][0]
