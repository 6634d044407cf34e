"""Elastic rendezvous across several real agents on loopback.

Each agent gets its own --local-addr (127.0.0.x) and the first one hosts
the store (is_host=1). Workers are a tiny script that records its env and
waits for a `go` file, so the tests decide when a round may finish.
"""

import json
import os
import subprocess
import time

import pytest

from harness import PYTHON, Background, FAST, Job, free_port, wait_for
from etcd_cluster import etcd_cluster  # noqa: F401

@pytest.fixture(params=["c10d", "etcd"])
def rdzv_backend(request):
    """Every job_factory test runs against the embedded store and etcd."""
    if request.param == "etcd":
        return "etcd", request.getfixturevalue("etcd_cluster")
    return "c10d", None


@pytest.fixture
def job_factory(agent, tmp_path, rdzv_backend):
    jobs = []

    def make(**kw):
        j = Job(agent, tmp_path, backend=rdzv_backend[0],
                etcd=rdzv_backend[1], **kw)
        jobs.append(j)
        return j
    yield make
    for j in jobs:
        j.cleanup()



def test_four_agents_form_one_round(job_factory):
    job = job_factory(nnodes="4", nproc=2, conf=FAST)
    for i in range(4):
        job.start(i)
    recs = job.wait_round([f"node{i}" for i in range(4)])
    group = {n: r["GROUP_RANK"] for (n, _), r in recs.items()}
    assert sorted(set(group.values())) == ["0", "1", "2", "3"]
    assert sorted(int(r["RANK"]) for r in recs.values()) == list(range(8))
    rank0 = next(n for n, g in group.items() if g == "0")
    assert {(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in recs.values()} == {
        (f"127.0.0.{int(rank0[4:]) + 1}", recs[(rank0, "0")]["MASTER_PORT"])}
    assert {r["WORLD_SIZE"] for r in recs.values()} == {"8"}
    for (n, lr), r in recs.items():
        assert int(r["RANK"]) == 2 * int(r["GROUP_RANK"]) + int(lr)
    if job.backend == "c10d":
        assert group["node0"] == "0"  # the store host
    status = subprocess.run(
        [job.agent, "status"] + job.status_args()
        + ["--rdzv-id", "testjob", "--json"],
        capture_output=True, text=True, timeout=30)
    assert status.returncode == 0, status.stderr
    [state] = json.loads(status.stdout)
    assert state["closed"] and state["round"] == 0
    assert [p["rank"] for p in state["participants"]] == [0, 1, 2, 3]
    by_rank = {p["rank"]: p["addr"] for p in state["participants"]}
    assert by_rank[0] == f"127.0.0.{int(rank0[4:]) + 1}"
    assert all(p["heartbeat_age_s"] is not None
               for p in state["participants"])
    table = subprocess.run(
        [job.agent, "status"] + job.status_args() + ["--rdzv-id=testjob"],
        capture_output=True, text=True, timeout=30)
    assert "round 0 closed" in table.stdout, table.stderr
    job.go()
    for i in range(4):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_status_shows_the_first_round_while_it_is_open(job_factory):
    # Round 0 writes no state until it closes: status must still show who
    # joined, what the round waits for and until when.
    job = job_factory(nnodes="2:3", conf=FAST + ",last_call_timeout=120")

    def status(*extra):
        return subprocess.run(
            [job.agent, "status", "--rdzv-id", "testjob"] + job.status_args()
            + list(extra), capture_output=True, text=True, timeout=30)

    job.start(0)
    wait_for(lambda: "waiting for 1 more" in status().stdout, 30,
             what="status of the open first round")
    table = status().stdout
    assert "round 0 open" in table and "127.0.0.1 " in table, table
    job.start(1)
    wait_for(lambda: "last call ends" in status().stdout, 30,
             what="status of the round's last call")
    [state] = json.loads(status("--json").stdout)
    assert not state["closed"] and state["round"] == 0, state
    open_round = state["open_round"]
    assert open_round["joined"] == 2 and open_round["min_nodes"] == 2, state
    assert open_round["max_nodes"] == 3 and open_round["nodes_needed"] == 0
    assert open_round["last_call_ends"].endswith("Z"), state
    assert len(state["participants"]) == 2, state
    # A third node fills the round: it closes at once.
    job.start(2)
    job.wait_round(["node0", "node1", "node2"])
    job.go()
    for i in range(3):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_status_json_is_json_when_there_is_no_rendezvous(agent):
    # Nothing listens there: the error is on stderr, and JSON on stdout.
    r = subprocess.run([agent, "status", "--json", "--timeout", "1",
                        "--rdzv-endpoint", f"127.0.0.1:{free_port()}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert json.loads(r.stdout)["exit_code"] == r.returncode, r.stdout
    assert "status:" in r.stderr


def test_every_agent_leaves_at_once_when_the_job_succeeds(job_factory):
    # Default keep_alive_interval (5 s): a watch left to time out at exit
    # (the store host's own, once) would show as seconds here.
    job = job_factory(nnodes="2")
    for i in range(2):
        job.start(i)
    job.wait_round(["node0", "node1"])
    job.go()
    went = time.monotonic()
    for i in range(2):
        assert job.procs[i].wait(60) == 0, job.log(i)
    assert time.monotonic() - went < 2.5, job.log(0)


def test_elastic_late_joiner_reforms_without_a_restart(job_factory):
    job = job_factory(nnodes="2:4", conf=FAST + ",last_call_timeout=1")
    for i in range(3):
        job.start(i)
    first = job.wait_round(["node0", "node1", "node2"])
    assert {r["GROUP_WORLD_SIZE"] for r in first.values()} == {"3"}
    job.start(3)
    recs = job.wait_round([f"node{i}" for i in range(4)])
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {"0"}
    # Every member may race to open it; the log names the one that did.
    logs = "".join(job.log(i) for i in range(4))
    assert logs.count("opened round 1 of") == 1, logs
    assert sorted(r["GROUP_RANK"] for r in recs.values()) == [
        "0", "1", "2", "3"]
    # Ranks are stable where membership allows.
    for n in ("node0", "node1", "node2"):
        assert recs[(n, "0")]["GROUP_RANK"] == first[(n, "0")]["GROUP_RANK"]
    job.go()
    for i in range(4):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_dead_peer_moves_survivors_to_a_new_round(job_factory):
    job = job_factory(nnodes="2:3", conf=FAST + ",last_call_timeout=0.5")
    for i in range(3):
        job.start(i)
    job.wait_round(["node0", "node1", "node2"])
    job.kill9(2)
    # Liveness timeout 1 s (0.5 s x 2), plus last call: well within 15 s,
    # while the survivors' workers keep running and never fail.
    recs = job.wait_round(["node0", "node1"], timeout=15)
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {"0"}
    assert "lost" in job.log(0) + job.log(1)
    job.go()
    for i in range(2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_worker_failure_restarts_every_node_into_a_new_round(job_factory):
    job = job_factory(nnodes="2", conf=FAST, max_restarts=1)
    for i in range(2):
        job.start(i, env={"TEST_FAIL_ONCE": "node1"})
    recs = wait_for(
        lambda: (lambda r: r if len(r) == 2 else None)(job.latest(
            lambda r: r["TORCHELASTIC_RESTART_COUNT"] == "1")),
        60, interval=0.05, what="both nodes restarted")
    assert {r["GROUP_WORLD_SIZE"] for r in recs.values()} == {"2"}
    job.go()
    for i in range(2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_no_progress_stops_every_node_with_81(job_factory):
    """node1's worker fails before any progress on every attempt: after
    3 attempts (10 restarts allowed) the job ends with the permanent 81
    on both nodes, node0 following node1's decision."""
    job = job_factory(nnodes="2", conf=FAST, max_restarts=10)
    for i in range(2):
        job.start(i, env={"TEST_FAIL_ALWAYS": "node1",
                          "TEST_FAIL_CODE": "200",
                          "DISTJOB_MAX_NO_PROGRESS_RESTARTS": "3"})
    for i in range(2):
        assert job.procs[i].wait(90) == 81, job.log(i)
    counts = {r["TORCHELASTIC_RESTART_COUNT"] for r in job.records()
              if r["node"] == "node1"}
    assert counts == {"0", "1", "2"}, job.records()
    assert "without progress" in job.log(1)


def test_host_killed_makes_the_others_exit_retryable(job_factory):
    job = job_factory(nnodes="2",
                      conf="keep_alive_interval=0.5,read_timeout=3")
    if job.backend != "c10d":
        pytest.skip("etcd has no store host; see test_etcd.py")
    for i in range(2):
        job.start(i)
    job.wait_round(["node0", "node1"])
    killed = time.monotonic()
    job.kill9(0)
    rc = job.procs[1].wait(30)
    # read_timeout (3 s) plus at most one watch interval and slack.
    assert time.monotonic() - killed < 3 + 0.5 + 2.5, job.log(1)
    assert rc == 138, job.log(1)
    assert "store" in job.log(1)


def test_store_host_up_seconds_after_a_refused_join(job_factory):
    """A joining agent starts first and is refused (the host pod is not up
    yet: a common order in a real cluster), then the host starts. gRPC's
    client only makes progress on a connection while some thread polls it;
    a join that only asked "why not ready?" between its pauses left the
    new connection to gRPC's backup poller (every 5 s), each attempt timed
    out before the server's SETTINGS were read, and the joiner waited
    until its join_timeout although the store was up."""
    job = job_factory(nnodes="2")
    if job.backend != "c10d":
        pytest.skip("c10d store host only")
    job.start(1)
    wait_for(lambda: "waiting for the rendezvous store" in job.log(1), 30,
             interval=0.05, what="node1 to be refused by the absent host")
    job.start(0)
    job.wait_round(["node0", "node1"], timeout=20)
    job.go()
    for i in range(2):
        assert job.procs[i].wait(30) == 0, job.log(i)


def test_endpoint_name_that_resolves_late(job_factory, tmp_path):
    """The joining agent sees an endpoint name that is not in its hosts
    file yet (a private mount namespace gives it its own /etc/hosts); it
    keeps looking it up (the agent's resolver, common/resolver.h) until the
    name appears."""
    if subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.skip("no mount namespaces here")
    job = job_factory(nnodes="2", conf="read_timeout=2,keep_alive_interval=1")
    if job.backend != "c10d":
        pytest.skip("c10d store host only")
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    name = "rdzv-late.distjob-test"
    job.start(0)
    # Node 1 reaches the store by name only.
    real_port = job.port
    args_env = {"TEST_NODE": "node1"}
    full_env = dict(os.environ, **args_env,
                    DISTJOB_TERMINATION_LOG=str(tmp_path / "t1"))
    cmd = (f"mount --bind {hosts} /etc/hosts && exec {job.agent} run "
           f"--nnodes 2 --rdzv-backend c10d "
           f"--rdzv-endpoint {name}:{real_port} --rdzv-id testjob "
           f"--rdzv-conf is_host=0,read_timeout=2,keep_alive_interval=1 "
           f"--local-addr 127.0.0.2 --no-python {PYTHON} "
           f"{job.dir / 'worker.py'} {job.out}")
    job.procs[1] = job.background.start(["unshare", "-m", "sh", "-c", cmd],
                                        env=full_env,
                                        log=tmp_path / "agent1.log")
    wait_for(lambda: "waiting for the rendezvous store" in job.log(1), 30,
             interval=0.1, what="node1 to wait for the unresolvable name")
    with open(hosts, "a") as f:  # in place: the bind mount keeps the inode
        f.write(f"127.0.0.1 {name}\n")
    job.wait_round(["node0", "node1"], timeout=60)
    job.go()
    for i in range(2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_kubeflow_elastic_env_without_flags(agent, tmp_path):
    """Kubeflow's elastic PyTorchJob drives the agent through PET_* only."""
    port = free_port()
    out = tmp_path / "out"
    out.mkdir()
    procs = []
    with Background() as background:
        for i in range(2):
            env = dict(os.environ,
                       PET_NNODES="2:4",
                       PET_NPROC_PER_NODE="1",
                       PET_RDZV_ENDPOINT=f"127.0.0.1:{port}",
                       PET_RDZV_BACKEND="c10d",
                       PET_RDZV_ID="kf",
                       PET_MAX_RESTARTS="3",
                       PET_LOCAL_ADDR=f"127.0.0.{i + 1}",
                       PET_RDZV_CONF=f"is_host={1 if i == 0 else 0},"
                                     "last_call_timeout=1",
                       DISTJOB_TERMINATION_LOG=str(tmp_path / f"t{i}"))
            procs.append(background.start(
                [agent, "run", "--no-python", "sh", "-c",
                 f"echo $GROUP_RANK $WORLD_SIZE $TORCHELASTIC_MAX_RESTARTS "
                 f"> {out}/$RANK"], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        # Leaving is prompt: no agent waits out read_timeout (60 s) on a
        # store host that already left.
        outs = [p.communicate(timeout=30)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
    assert (out / "0").read_text().split() == ["0", "2", "3"]
    assert (out / "1").read_text().split() == ["1", "2", "3"]


def test_agent_leaving_for_good_tells_the_others(job_factory):
    """A permanent worker failure ends node1's agent; node0 is told at once
    instead of waiting for node1's lease and then for join_timeout."""
    job = job_factory(nnodes="2", conf=FAST)
    for i in range(2):
        job.start(i, env={"TEST_FAIL_ONCE": "node1", "TEST_FAIL_CODE": "1"})
    assert job.procs[1].wait(60) == 1, job.log(1)
    assert job.procs[0].wait(20) == 138, job.log(0)
    assert "ended" in job.log(0)


def test_heterogeneous_nproc_ranks(job_factory):
    job = job_factory(nnodes="2", conf=FAST)
    job.start(0, nproc=1)
    job.start(1, nproc=3)
    recs = wait_for(lambda: (lambda r: r if len(r) == 4 else None)(
        job.latest()), 60, interval=0.05, what="4 workers")
    assert {r["WORLD_SIZE"] for r in recs.values()} == {"4"}
    # node0 (the c10d store host) is group rank 0; over etcd, whoever
    # joined first is.
    base1 = 1 if recs[("node0", "0")]["GROUP_RANK"] == "0" else 0
    assert base1 == 1 or job.backend != "c10d"
    assert recs[("node0", "0")]["RANK"] == str(3 * (1 - base1))
    assert sorted(recs[("node1", str(lr))]["RANK"] for lr in range(3)) == [
        str(base1 + lr) for lr in range(3)]
    assert recs[("node1", "0")]["LOCAL_WORLD_SIZE"] == "3"
    job.go()
    for i in range(2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_static_backend_fixed_ranks(agent, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    port = free_port()
    for node_rank in (1, 0):
        r = subprocess.run(
            [agent, "run", "--nnodes", "2", "--nproc-per-node", "2",
             "--rdzv-backend", "static", "--node-rank", str(node_rank),
             "--master-addr", "127.0.0.1", "--master-port", str(port),
             "--no-python", "sh", "-c",
             f"echo $GROUP_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
             f"> {out}/$RANK"],
            env=dict(os.environ,
                     DISTJOB_TERMINATION_LOG=str(tmp_path / "t")),
            capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    for rank in range(4):
        assert (out / str(rank)).read_text().split() == [
            str(rank // 2), "4", "127.0.0.1", str(port)]
