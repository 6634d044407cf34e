"""Multi-node PyTorch DDP (Debian's python3-torch, gloo) across namespace
pods: a Volcano-style master/worker job whose agents find each other through
/etc/volcano, the pods' hostnames and the cluster DNS, and rendezvous over
c10d with the store on the master pod."""

import json
import os
import pathlib
import signal
import time

import pytest

from harness import PYTHON, wait_for
from multinode import (EXAMPLE, GRACE, READ_TIMEOUT, rdzv_env, results_text,
                       run_args, torch_available)

pytestmark = pytest.mark.skipif(not torch_available(),
                                reason="Debian's python3-torch is missing")


def test_ddp_two_pods_two_workers_end_identical(make_cluster, artifacts):
    c = make_cluster("ddp2", {"master": 1, "worker": 1})
    out = artifacts / "ranks"
    out.mkdir()
    master = c.pods["ddp2-master-0"]
    pods = c.start_all(
        lambda pod: run_args(pod, [PYTHON, str(EXAMPLE), "--epochs", "4",
                                   "--out", str(out)]),
        env=rdzv_env(c, master, nnodes=2))
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=150)
    for name, r in results.items():
        assert r.exit_code == 0, results_text(results)
        assert "succeeded" in r.termination_message or \
            "exit_code=0" in r.termination_message, r.termination_message
    ranks = [json.loads((out / f"rank{i}.json").read_text())
             for i in range(4)]
    assert [x["world_size"] for x in ranks] == [4] * 4
    # DDP averaged every gradient across both pods: one model, four copies.
    assert len({x["digest"] for x in ranks}) == 1, ranks
    assert ranks[0]["losses"][-1] < ranks[0]["losses"][0]
    assert c.leftover_processes() == {}


# --- steered training: tests/e2e/ddp_driver.py ------------------------------

DRIVER = pathlib.Path(__file__).parent / "ddp_driver.py"


class Steered:
    """A job of ddp_driver.py workers: where their start records, gate
    markers and checkpoint live, and the gate that holds them."""

    def __init__(self, artifacts, gate=1000):
        self.dir = artifacts / "steer"
        self.dir.mkdir()
        self.gate = self.dir / "GATE"
        self.set_gate(gate)
        self.checkpoint = self.dir / "model.pt"
        self.out = self.dir / "ranks"

    def set_gate(self, epoch):
        tmp = self.gate.with_suffix(".tmp")
        tmp.write_text(str(epoch))
        os.replace(tmp, self.gate)

    def command(self, epochs):
        return [PYTHON, str(DRIVER), "--epochs", str(epochs), "--checkpoint",
                str(self.checkpoint), "--out", str(self.out)]

    def env(self, base, **extra):
        env = dict(base)
        env.update({"START_DIR": str(self.dir), "GATE": str(self.gate)})
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def held(self, world, epoch):
        """True once every rank of a `world`-rank group holds after
        `epoch`."""
        return all((self.dir / f"gate-{world}-{r}-{epoch}").exists()
                   for r in range(world))

    def starts(self):
        return [json.loads(p.read_text())
                for p in sorted(self.dir.glob("start-*.json"))]

    def ranks(self, world):
        return [json.loads((self.out / f"rank{i}.json").read_text())
                for i in range(world)]


def test_elastic_scale_up_to_three_pods_then_lose_one(make_cluster,
                                                       artifacts):
    # Kubeflow's elastic PyTorchJob shape: workers only, the store on
    # worker-0. An elastic job does not wait for every replica's record
    # (the third pod is not scheduled yet): --dns-timeout 0.
    c = make_cluster("elastic", {"worker": 3})
    s = Steered(artifacts, gate=2)
    w0, w1, w2 = (c.pods[f"elastic-worker-{i}"] for i in range(3))
    env = s.env(rdzv_env(c, w0, nnodes="2:3"), DISTJOB_DNS_TIMEOUT=0)
    for pod in (w0, w1):
        c.start_pod("worker", pod.index, run_args(pod, s.command(8)),
                    env=env)
        c.mark_ready(pod)
    wait_for(lambda: s.held(4, 1), 60, interval=0.1,
             what="2 pods x 2 workers to train 2 epochs")

    # Scale up: the third pod joins, every worker re-forms with 6 ranks and
    # resumes from the checkpoint of epoch 1. The gate stays: the held
    # group must not train on before the newcomer is in.
    c.start_pod("worker", 2, run_args(w2, s.command(8)), env=env)
    c.mark_ready(w2)
    wait_for(lambda: s.held(6, 2), 60, interval=0.1,
             what="3 pods x 2 workers to train epoch 2")
    six = [x for x in s.starts() if x["world"] == 6]
    assert sorted(x["rank"] for x in six) == list(range(6)), s.starts()
    assert {x["start_epoch"] for x in six} == {2}, six

    # A non-host pod's node dies while the group holds between epochs (one
    # dying inside a collective fails its peers' workers with exit 1 before
    # the lease expires: see docs/testing.md): the two left re-form and finish.
    c.kill_agent(w1, signal.SIGKILL)
    wait_for(lambda: len([x for x in s.starts() if x["world"] == 4
                          and x["start_epoch"] == 3]) == 4, 60, interval=0.1,
             what="the two pods left to re-form")
    s.set_gate(1000)
    results = {p.name: p.wait(150) for p in (w0, w2)}
    for name, r in results.items():
        assert r.exit_code == 0, results_text(results)
        # Membership changes are not failures: no restart was counted.
        assert "restarts=0/" in r.termination_message, r.termination_message
    assert w1.wait(10).exit_code != 0
    final = s.ranks(4)
    assert [x["world_size"] for x in final] == [4] * 4
    assert {x["start_epoch"] for x in final} == {3}, final
    assert len({x["digest"] for x in final}) == 1, final
    assert c.leftover_processes() == {}


def test_worker_sigkill_restarts_every_pod_once(make_cluster, artifacts):
    c = make_cluster("restart", {"master": 1, "worker": 1})
    s = Steered(artifacts)
    master = c.pods["restart-master-0"]
    env = s.env(rdzv_env(c, master, nnodes=2, max_restarts=1),
                FAULT="kill", FAULT_POD="restart-worker-0", FAULT_EPOCH=1)
    pods = c.start_all(lambda pod: run_args(pod, s.command(4)), env=env)
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=150)
    for name, r in results.items():
        assert r.exit_code == 0, results_text(results)
        assert "restarts=1/1" in r.termination_message, results_text(results)
    # The second attempt of all four ranks resumed from the checkpoint.
    again = [x for x in s.starts() if x["restart"] == 1]
    assert sorted(x["rank"] for x in again) == [0, 1, 2, 3], s.starts()
    assert {x["start_epoch"] for x in again} == {2}, again
    final = s.ranks(4)
    assert len({x["digest"] for x in final}) == 1, final
    assert c.leftover_processes() == {}


def test_worker_exit_1_stops_every_pod_with_root_cause(make_cluster,
                                                       artifacts):
    c = make_cluster("perm", {"master": 1, "worker": 1})
    s = Steered(artifacts)
    master = c.pods["perm-master-0"]
    env = s.env(rdzv_env(c, master, nnodes=2, max_restarts=3),
                FAULT="exit", FAULT_POD="perm-worker-0", FAULT_EPOCH=1,
                FAULT_EXCEPTION="ValueError")
    pods = c.start_all(lambda pod: run_args(pod, s.command(1000)), env=env)
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=60)
    failed = results["perm-worker-0"]
    # A bug (ValueError, in the cause table): no restart although three
    # were allowed.
    assert failed.exit_code == 1, results_text(results)
    assert "restarts=0/3" in failed.termination_message
    assert "loss is NaN at epoch 1 on perm-worker-0" in \
        failed.termination_message, failed.termination_message
    assert "local_rank=1" in failed.termination_message
    assert "loss is NaN at epoch 1" in json.dumps(failed.error_file)
    # Promptly: the other pod did not train on for 1000 epochs, nor wait
    # for a lease or a timeout.
    other = results["perm-master-0"]
    # ... and its termination message gives the job's root cause, the
    # failing pod's ValueError, whichever node saw a failure first: the
    # failing node's own decision, which this pod follows (138), or, when
    # this pod's gloo collateral was seen first (the failing worker's
    # sockets close before its Python exits, so on a loaded host the
    # collateral can win), the failure that node offered while this pod
    # waited for a lost peer: this pod then decides on it (exit 1).
    assert "loss is NaN at epoch 1 on perm-worker-0" in \
        other.termination_message, other.termination_message
    if other.exit_code == 138:
        assert "node perm-worker-0" in other.termination_message
    else:
        assert other.exit_code == 1, results_text(results)
        assert "host=perm-worker-0" in other.termination_message, \
            other.termination_message
    assert other.duration < failed.duration + 15, results_text(results)
    assert not [x for x in s.starts() if x["restart"] > 0], s.starts()
    assert c.leftover_processes() == {}


def test_store_host_pod_killed_others_exit_retryable(make_cluster,
                                                     artifacts):
    c = make_cluster("lost", {"master": 1, "worker": 2})
    s = Steered(artifacts, gate=1)
    master = c.pods["lost-master-0"]
    env = s.env(rdzv_env(c, master, nnodes=3, nproc=1))
    pods = c.start_all(lambda pod: run_args(pod, s.command(1000)), env=env)
    for pod in pods:
        c.mark_ready(pod)
    wait_for(lambda: s.held(3, 0), 60, interval=0.1,
             what="every pod to train an epoch")
    killed = time.monotonic()
    c.kill_pod(master)
    others = [p for p in pods if p is not master]
    results = {p.name: p.wait(READ_TIMEOUT + 20) for p in others}
    for name, r in results.items():
        assert r.exit_code == 138, results_text(results)
    took = time.monotonic() - killed
    assert took < READ_TIMEOUT + 5, f"{took:.1f}s\n{results_text(results)}"
    assert c.leftover_processes() == {}


def test_sigterm_to_every_pod_during_multinode_training(make_cluster,
                                                         artifacts):
    c = make_cluster("stop", {"master": 1, "worker": 1})
    s = Steered(artifacts, gate=2)
    master = c.pods["stop-master-0"]
    pods = c.start_all(lambda pod: run_args(pod, s.command(1000)),
                       env=s.env(rdzv_env(c, master, nnodes=2)))
    for pod in pods:
        c.mark_ready(pod)
    wait_for(lambda: s.held(4, 1), 60, interval=0.1,
             what="both pods to train two epochs")
    c.stop_all_within(pods, GRACE, slack=10)
    assert c.leftover_processes() == {}


def test_elastic_c10d_without_local_addr_publishes_the_fqdn(make_cluster,
                                                            artifacts):
    """No --local-addr: rank 0's agent publishes its FQDN as MASTER_ADDR
    (torchrun's socket.getfqdn()), which resolves from the other pod where
    the bare pod name does not."""
    c = make_cluster("fq", {"master": 1, "worker": 1})
    out = artifacts / "ranks"
    out.mkdir()
    master = c.pods["fq-master-0"]
    command = ["sh", "-c",
               f'echo "$MASTER_ADDR" > {out}/addr$RANK; exec "$@"', "sh",
               PYTHON, str(EXAMPLE), "--epochs", "2", "--out", str(out)]
    pods = c.start_all(
        lambda pod: ["run", "--shutdown-timeout", str(GRACE), "--"] + command,
        env=rdzv_env(c, master, nnodes=2))
    for pod in pods:
        c.mark_ready(pod)
    results = c.wait_all(timeout=150)
    for r in results.values():
        assert r.exit_code == 0, results_text(results)
    addrs = {(out / f"addr{i}").read_text().strip() for i in range(4)}
    assert len(addrs) == 1, addrs
    # Rank 0 is whichever pod sorts first; either way a pod's FQDN.
    assert addrs <= {p.fqdn for p in c.pods.values()}, addrs
    ranks = [json.loads((out / f"rank{i}.json").read_text())
             for i in range(4)]
    assert [x["world_size"] for x in ranks] == [4] * 4
