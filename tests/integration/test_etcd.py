"""What only the etcd backend promises: the job survives the loss of an
etcd member, an unreachable cluster is a retryable exit that names the
endpoints, and a finished job leaves no keys behind, so a rerun with the
same --rdzv-id starts clean. The rest of the rendezvous behaviour is the
parameterised suite in test_rendezvous.py."""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from etcd_cluster import own_etcd_cluster, etcd_cluster  # noqa: E402,F401
from test_rendezvous import FAST, PYTHON, Job  # noqa: E402


@pytest.fixture
def etcd_job(agent, tmp_path):
    jobs = []

    def make(cluster, **kw):
        j = Job(agent, tmp_path, backend="etcd", etcd=cluster, **kw)
        jobs.append(j)
        return j
    yield make
    for j in jobs:
        j.cleanup()


def test_losing_an_etcd_member_loses_nothing(etcd_job, own_etcd_cluster):
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2:3", conf=FAST + ",last_call_timeout=1")
    for i in range(2):
        job.start(i)
    first = job.wait_round(["node0", "node1"])
    # Member 0 is the first endpoint every agent talks to.
    cluster.kill(0)
    # The store still takes writes and wakes watchers: a third node joins
    # and the round re-forms without anyone being declared lost.
    job.start(2)
    recs = job.wait_round(["node0", "node1", "node2"], timeout=60)
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {"0"}
    for n in ("node0", "node1"):
        assert recs[(n, "0")]["GROUP_RANK"] == first[(n, "0")]["GROUP_RANK"]
    assert "lost" not in job.log(0) + job.log(1)
    job.go()
    for i in range(3):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_losing_the_first_agent_is_a_peer_loss(etcd_job, etcd_cluster):
    job = etcd_job(etcd_cluster, nnodes="2:3",
                   conf=FAST + ",last_call_timeout=0.5")
    for i in range(3):
        job.start(i)
    job.wait_round(["node0", "node1", "node2"])
    job.kill9(0)
    recs = job.wait_round(["node1", "node2"], timeout=20)
    assert sorted(r["GROUP_RANK"] for r in recs.values()) == ["0", "1"]
    job.go()
    for i in (1, 2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_unreachable_cluster_is_retryable_and_names_endpoints(agent,
                                                              tmp_path):
    endpoints = "127.0.0.1:9,127.0.0.1:11"
    r = subprocess.run(
        [agent, "run", "--nnodes", "1", "--rdzv-backend", "etcd",
         "--rdzv-endpoint", endpoints, "--rdzv-id", "gone",
         "--rdzv-conf", "join_timeout=2,read_timeout=1",
         "--no-python", "true"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / "t")))
    assert r.returncode == 138, r.stdout + r.stderr
    assert endpoints in r.stdout + r.stderr


def test_rerun_with_the_same_id_starts_clean(etcd_job, etcd_cluster):
    job = etcd_job(etcd_cluster, nnodes="2", conf=FAST)
    prefix = f"/{job.dir.name}/"
    for attempt in range(2):
        # Same id, same prefix, fresh agents; the workers finish at once.
        job.out = job.dir / f"out{attempt}"
        job.out.mkdir()
        job.go()
        for i in range(2):
            job.start(i)
        for i in range(2):
            assert job.procs[i].wait(60) == 0, job.log(i)
        recs = job.latest()
        assert len(recs) == 2
        # Round 0 again: nothing of the first run was left to resume.
        assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {
            "0"}
        # Both agents left: their leases are revoked, no key remains.
        assert etcd_cluster.keys(prefix) == [], job.log(0)
