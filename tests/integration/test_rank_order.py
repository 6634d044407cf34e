"""Ranks in topology order: c10d rounds of real agents on loopback, each
told its pod index the way an Indexed Job or JobSet tells it
(JOB_COMPLETION_INDEX and the pod's hostname), some with --rank-order-key.
"""

import json
import subprocess

from harness import Job, wait_for


def pod_env(index, key=None):
    env = {"JOB_COMPLETION_INDEX": str(index),
           "DISTJOB_HOSTNAME": f"rk-{index}"}
    if key is not None:
        env["DISTJOB_RANK_ORDER_KEY"] = key
    return env


def status(job):
    r = subprocess.run([job.agent, "status", "--json", "--rdzv-id", "testjob"]
                       + job.status_args(), capture_output=True, text=True,
                       timeout=30)
    return json.loads(r.stdout)[0] if r.returncode == 0 else None


def group_ranks(job, n):
    recs = job.wait_round([f"node{i}" for i in range(n)])
    return {node: r["GROUP_RANK"] for (node, _), r in recs.items()}


def test_reverse_join_order_gets_pod_index_order(agent, tmp_path):
    job = Job(agent, tmp_path, "4")
    try:
        # node0 has pod index 3, node3 pod index 0, started in that order,
        # each once the previous one reached the store. node0 hosts the
        # store: without a pod index it would be rank 0 (host first, then
        # join order).
        for i in range(4):
            job.start(i, env=pod_env(3 - i))
            wait_for(lambda: "rendezvous store" in job.log(i), 30,
                     what=f"node{i} to reach the store")
        ranks = group_ranks(job, 4)
        assert ranks == {f"node{i}": str(3 - i) for i in range(4)}
        state = status(job)
        assert [p["pod_index"] for p in state["participants"]] == \
            ["0", "1", "2", "3"]
        job.go()
        for i in range(4):
            assert job.procs[i].wait(60) == 0, job.log(i)
    finally:
        job.cleanup()


def test_rank_order_key_keeps_a_rack_adjacent(agent, tmp_path):
    job = Job(agent, tmp_path, "4")
    try:
        racks = ["rack-b", "rack-a", "rack-b", "rack-a"]  # by pod index
        for i in range(4):
            job.start(i, env=pod_env(i, racks[i]))
        ranks = group_ranks(job, 4)
        # rack-b (pod indexes 0, 2) first: its lowest index is lowest.
        assert ranks == {"node0": "0", "node2": "1", "node1": "2",
                         "node3": "3"}
        job.go()
        for i in range(4):
            assert job.procs[i].wait(60) == 0, job.log(i)
    finally:
        job.cleanup()


def test_bad_rank_order_key_exits_2(run_agent):
    r = run_agent(["run", "--rank-order-key", "rack a", "--", "true"])
    assert r.returncode == 2
    assert "rank-order-key" in r.stderr and \
        "is not a label value" in r.stderr, r.stderr
