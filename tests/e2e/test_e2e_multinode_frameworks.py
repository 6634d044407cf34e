"""TensorFlow- and MXNet-shaped Volcano jobs: each pod's agent computes
TF_CONFIG / DMLC_* from /etc/volcano and its hostname, waits for its peers'
DNS records, and runs a stand-in worker (framework_standin.py) that checks
that description against every other pod over the network."""

import json

from harness import PYTHON
from multinode import STANDIN, results_text



def run_job(make_cluster, artifacts, job, tasks):
    c = make_cluster(job, tasks)
    out = artifacts / "standin"
    out.mkdir()
    pods = c.start_all(["run", "--", PYTHON, str(STANDIN)],
                       env={"OUT": str(out)})
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=90)
    for name, r in results.items():
        assert r.exit_code == 0, results_text(results)
    assert c.leftover_processes() == {}
    return c, {p.name: json.loads((out / f"{p.name}.json").read_text())
               for p in pods}


def test_tensorflow_ps_worker_chief(make_cluster, artifacts):
    c, seen = run_job(make_cluster, artifacts, "tf",
                      {"ps": 1, "worker": 2, "chief": 1})
    cluster = {"ps": ["tf-ps-0.tf:2222"],
               "worker": ["tf-worker-0.tf:2222", "tf-worker-1.tf:2222"],
               "chief": ["tf-chief-0.tf:2222"]}
    for name, s in seen.items():
        pod = c.pods[name]
        assert s["tf_config"]["cluster"] == cluster, s
        assert s["tf_config"]["task"] == {"type": pod.task,
                                          "index": pod.index}, s
        # Every pod dialed the three others and was dialed by them.
        assert len(s["reached"]) == 3 and len(s["reached_by"]) == 3, s


def test_mxnet_scheduler_server_worker(make_cluster, artifacts):
    c, seen = run_job(make_cluster, artifacts, "mx",
                      {"scheduler": 1, "server": 2, "worker": 2})
    scheduler = seen["mx-scheduler-0"]
    assert scheduler["registered"] == sorted(
        ["mx-server-0", "mx-server-1", "mx-worker-0", "mx-worker-1"])
    for name, s in seen.items():
        assert s["dmlc"]["DMLC_PS_ROOT_URI"] == "mx-scheduler-0.mx", s
        assert s["dmlc"]["DMLC_NUM_SERVER"] == "2", s
        assert s["dmlc"]["DMLC_NUM_WORKER"] == "2", s
    for i in range(2):
        assert seen[f"mx-worker-{i}"]["dmlc"]["DMLC_WORKER_ID"] == str(i)
        assert seen[f"mx-worker-{i}"]["servers"] == seen["mx-worker-0"][
            "servers"]
        # Each server was dialed by both workers.
        assert seen[f"mx-server-{i}"]["dialed_by"] == ["0", "1"]
