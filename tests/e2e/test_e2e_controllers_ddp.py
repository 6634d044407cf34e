"""Two-node PyTorch DDP (Debian's python3-torch, gloo) across namespace pods
shaped as the newer controllers make them, with nothing but what the
controller injects: the agent runs as the image's ENTRYPOINT
(`distjob-agent run --`) with no flag of its own.

- JobSet: pods <jobset>-<replicatedjob>-<jobIndex>-<podIndex> under the
  subdomain <jobset>, the jobset.sigs.k8s.io/* labels in the downward-API
  file /etc/podinfo/labels, JOB_COMPLETION_INDEX.
- LeaderWorkerSet: LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX.
"""

import json

import pytest

from harness import PYTHON
from multinode import EXAMPLE, results_text, torch_available

pytestmark = pytest.mark.skipif(not torch_available(),
                                reason="Debian's python3-torch is missing")

def entrypoint(command):
    """The image's ENTRYPOINT; the user's training command follows it."""
    return ["run", "--"] + list(command)


def train(out):
    return [PYTHON, str(EXAMPLE), "--epochs", "2", "--out", str(out)]


def assert_one_model(results, out, world):
    for r in results.values():
        assert r.exit_code == 0, results_text(results)
    ranks = [json.loads((out / f"rank{i}.json").read_text())
             for i in range(world)]
    assert [x["world_size"] for x in ranks] == [world] * world
    assert len({x["digest"] for x in ranks}) == 1, ranks


def jobset_labels(pod):
    job_index = int(pod.task.rsplit("-", 1)[1])
    labels = {"jobset.sigs.k8s.io/jobset-name": "js",
              "jobset.sigs.k8s.io/replicatedjob-name": "node",
              "jobset.sigs.k8s.io/job-index": str(job_index),
              "jobset.sigs.k8s.io/job-global-index": str(job_index),
              "jobset.sigs.k8s.io/replicatedjob-replicas": "2",
              "jobset.sigs.k8s.io/global-replicas": "2",
              "jobset.sigs.k8s.io/restart-attempt": "0"}
    return {"podinfo/labels": "".join(f'{k}="{v}"\n'
                                      for k, v in sorted(labels.items()))}


def test_jobset_shaped_job_trains_with_no_agent_flags(make_cluster,
                                                      artifacts):
    # Tasks node-0 and node-1, one pod each: js-node-0-0.js, js-node-1-0.js.
    c = make_cluster("js", {"node-0": 1, "node-1": 1}, volcano=False,
                     pod_files=jobset_labels)
    out = artifacts / "ranks"
    out.mkdir()
    pods = c.start_all(entrypoint(train(out)),
                       env={"JOB_COMPLETION_INDEX": "0"})
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=150)
    assert_one_model(results, out, 2)
    assert c.leftover_processes() == {}


def test_lws_shaped_job_trains_with_no_agent_flags(make_cluster, artifacts):
    c = make_cluster("lw", {"0": 2}, volcano=False)
    leader = c.pods["lw-0-0"]
    out = artifacts / "ranks"
    out.mkdir()
    pods = c.start_all(
        entrypoint(train(out)),
        env=lambda pod: {"LWS_LEADER_ADDRESS": leader.host,
                         "LWS_GROUP_SIZE": "2",
                         "LWS_WORKER_INDEX": str(pod.index)})
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=150)
    assert_one_model(results, out, 2)
    assert c.leftover_processes() == {}
