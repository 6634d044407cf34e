"""The start barrier of a non-elastic, operator-described job.

Three agents of a Volcano-style TensorFlow job (ps x1, worker x2) run on
loopback (127.0.0.1-3, one --local-addr each), started 2 s apart. The
stand-in worker records when it started: with the barrier no worker starts
before the last agent arrived; with --no-barrier the first one does; a pod
that never comes makes every agent exit 138 naming it.
"""

import json
import os
import signal
import textwrap
import time

import pytest


from harness import (PYTHON, Background, free_port, log_time,
                     wait_for)

CLEAN = {k: None for k in os.environ
         if k.startswith(("VC_", "VK_", "PET_", "DISTJOB_", "MASTER_"))
         or k in ("TF_CONFIG", "DMLC_ROLE", "WORLD_SIZE", "RANK")}

WORKER = textwrap.dedent("""
    import json, os, pathlib, sys, time
    out = pathlib.Path(sys.argv[1])
    rec = {"pod": sys.argv[2], "t": time.time(),
           "tf_config": json.loads(os.environ.get("TF_CONFIG", "{}"))}
    tmp = out / f".{sys.argv[2]}.tmp"
    tmp.write_text(json.dumps(rec))
    tmp.rename(out / f"{sys.argv[2]}.json")
""")

PODS = [("ps", 0), ("worker", 0), ("worker", 1)]
STAGGER = 2.0  # seconds between agent starts, as pods come up in a cluster


class TfJob:
    """The agents of one job, cleaned up whatever happens."""

    def __init__(self, agent, tmp_path, *extra):
        self.agent = agent
        self.dir = tmp_path
        self.out = tmp_path / "out"
        self.out.mkdir()
        vc = tmp_path / "volcano"
        vc.mkdir()
        (vc / "ps.host").write_text("127.0.0.1")
        (vc / "worker.host").write_text("127.0.0.2\n127.0.0.3")
        (tmp_path / "worker.py").write_text(WORKER)
        self.base = [agent, "run", "--volcano-dir", str(vc), "--job-name",
                     "tfjob", "--dns-timeout", "0", "--barrier-port",
                     str(free_port()), *extra]
        self.env = {k: v for k, v in os.environ.items() if k not in CLEAN}
        self.procs = {}
        self.started = {}
        self.background = Background()

    def start(self, i):
        task, index = PODS[i]
        pod = f"{task}-{index}"
        env = dict(self.env,
                   DISTJOB_TERMINATION_LOG=str(self.dir / f"{pod}.term"))
        args = self.base + ["--task", task, "--task-index", str(index),
                            "--local-addr", f"127.0.0.{i + 1}",
                            "--no-python", PYTHON, str(self.dir / "worker.py"),
                            str(self.out), pod]
        self.started[pod] = time.time()
        self.procs[pod] = self.background.start(args, env=env,
                                                log=self.dir / f"{pod}.log")

    def log(self, pod):
        return (self.dir / f"{pod}.log").read_text()

    def records(self):
        return {p.stem: json.loads(p.read_text())
                for p in self.out.glob("*.json")}

    def stagger(self, since, ready):
        """Waits until `ready` and at least STAGGER s after `since`."""
        wait_for(lambda: ready() and time.time() >= since + STAGGER, 30,
                 what="the previous agent to be up")

    def wait_all(self, timeout):
        deadline = time.monotonic() + timeout
        codes = {}
        for pod, p in self.procs.items():
            codes[pod] = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        return codes

    def close(self):
        self.background.close()


@pytest.fixture
def job_factory(agent, tmp_path):
    jobs = []

    def make(*extra):
        jobs.append(TfJob(agent, tmp_path, *extra))
        return jobs[-1]
    yield make
    for j in jobs:
        j.close()


def test_no_worker_starts_before_the_last_agent(job_factory):
    job = job_factory("--barrier-timeout", "60")
    for i in range(3):
        if i > 0:
            prev = "-".join(map(str, PODS[i - 1]))
            job.stagger(job.started[prev],
                        lambda p=prev: "start barrier: waiting" in job.log(p))
        job.start(i)
    codes = job.wait_all(60)
    assert codes == {"ps-0": 0, "worker-0": 0, "worker-1": 0}, {
        p: job.log(p) for p in codes}
    recs = job.records()
    assert set(recs) == {"ps-0", "worker-0", "worker-1"}
    last_agent = max(job.started.values())
    assert min(r["t"] for r in recs.values()) >= last_agent
    assert "hosted here" in job.log("ps-0")
    assert "hosted by ps-0" in job.log("worker-1")
    # The workers still get the framework environment.
    assert recs["worker-1"]["tf_config"]["task"] == {"type": "worker",
                                                     "index": 1}


def test_no_barrier_starts_workers_at_once(job_factory):
    job = job_factory("--no-barrier")
    job.start(0)
    job.stagger(job.started["ps-0"], lambda: True)
    job.start(1)
    # The first pod's worker ran (and finished) with the last pod not up.
    wait_for(lambda: "ps-0" in job.records(), 30, what="ps-0's worker")
    job.stagger(job.started["worker-0"], lambda: True)
    job.start(2)
    codes = job.wait_all(60)
    assert set(codes.values()) == {0}
    assert job.records()["ps-0"]["t"] < job.started["worker-1"]
    assert "start barrier" not in job.log("ps-0")


def test_missing_pod_fails_every_agent_naming_it(job_factory):
    job = job_factory("--barrier-timeout", "4")
    job.start(0)
    job.stagger(job.started["ps-0"],
                lambda: "start barrier: waiting" in job.log("ps-0"))
    job.start(1)
    # A bound on a hang only: how long the agents took is read from their
    # own logs below, so a loaded machine (slow starts, a slow harness)
    # cannot fail the test.
    codes = job.wait_all(120)
    assert codes == {"ps-0": 138, "worker-0": 138}, {
        p: job.log(p) for p in codes}
    assert job.records() == {}
    for pod in codes:
        log = job.log(pod)
        assert "missing: worker-1" in log, log
        assert "138" in (job.dir / f"{pod}.term").read_text()
        # Each agent's wait is bounded by its own --barrier-timeout: the
        # join deadline, checked between store calls of at most 2 s
        # (read_timeout), and past those the wait is cancelled.
        waited = (log_time(log, "start barrier of job")
                  - log_time(log, "start barrier: waiting"))
        assert 4 - 0.1 <= waited <= 4 + 2 + 1 + 0.5, log


def test_missing_host_is_named(job_factory):
    job = job_factory("--barrier-timeout", "2")
    job.start(1)
    codes = job.wait_all(2 + 20)
    assert codes == {"worker-0": 138}
    assert "missing: ps-0" in job.log("worker-0"), job.log("worker-0")


def test_sigterm_ends_the_barrier_wait(job_factory):
    job = job_factory("--barrier-timeout", "600")
    job.start(1)
    p = job.procs["worker-0"]
    wait_for(lambda: "start barrier: waiting" in job.log("worker-0"), 30,
             what="the agent waiting in the barrier")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 128 + signal.SIGTERM, job.log("worker-0")
    assert job.records() == {}


def test_env_does_not_run_the_barrier(run_agent, tmp_path):
    vc = tmp_path / "volcano"
    vc.mkdir()
    (vc / "ps.host").write_text("127.0.0.1")
    (vc / "worker.host").write_text("127.0.0.2\n127.0.0.3")
    # Nobody else is up: a barrier would wait its full timeout.
    r = run_agent(["env", "--json", "--volcano-dir", str(vc), "--job-name",
                   "tfjob", "--task", "worker", "--task-index", "1",
                   "--dns-timeout", "0", "--barrier-timeout", "600"],
                  env=CLEAN, timeout=20)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["identity"]["task"] == "worker"
    # ... but says that `run` would, hosted by ps-0, for the 3 pods.
    assert out["barrier"] == {"runs": True, "host": "ps-0", "pods": 3}
    assert out["token"] == {"loaded": False, "used_by": ["start barrier"]}


def test_env_says_why_no_barrier_and_what_the_token_serves(run_agent,
                                                           tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret-token-value")
    r = run_agent(["env", "--json", "--nnodes", "1:2", "--rdzv-backend",
                   "c10d", "--rdzv-endpoint", "127.0.0.1:29400"],
                  env=dict(CLEAN, DISTJOB_RDZV_TOKEN_FILE=str(token)),
                  timeout=20)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["barrier"]["runs"] is False
    assert out["barrier"]["why_not"] == "no operator-described cluster"
    assert out["token"] == {"loaded": True, "used_by": ["rendezvous"]}
    assert "s3cret-token-value" not in r.stdout


@pytest.mark.parametrize("args", [["--barrier-port", "0"],
                                  ["--barrier-port", "x"],
                                  ["--barrier-timeout", "0"],
                                  ["--barrier-timeout", "soon"]])
def test_bad_barrier_flags_exit_2(run_agent, args):
    r = run_agent(["run", *args, "--", "true"], env=CLEAN)
    assert r.returncode == 2, r.stderr
    assert args[0] in r.stderr, r.stderr
