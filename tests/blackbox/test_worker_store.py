"""Who serves the workers' TCPStore (MASTER_ADDR:MASTER_PORT): group rank
0's agent, with TORCHELASTIC_USE_AGENT_STORE=True, as current torchrun;
worker rank 0 (False, a free port every round, as torch 1.13) with
--worker-store worker, DISTJOB_WORKER_STORE=worker or torchrun's
TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1."""

import json

import pytest

from harness import PYTHON, free_port

# Each worker records its store variables and whether something (not a
# worker: they never listen) accepts connections at MASTER_ADDR:MASTER_PORT.
PROBE = (
    "import json, os, socket, sys\n"
    "e = os.environ\n"
    "try:\n"
    "    socket.create_connection((e['MASTER_ADDR'], int(e['MASTER_PORT'])),"
    " timeout=5).close()\n"
    "    served = True\n"
    "except OSError:\n"
    "    served = False\n"
    "rec = {k: e.get(k) for k in ('MASTER_ADDR', 'MASTER_PORT',"
    " 'TORCHELASTIC_USE_AGENT_STORE', 'GROUP_RANK')}\n"
    "rec['served'] = served\n"
    "open(os.path.join(sys.argv[1], e['RANK'] + '.json'), 'w')"
    ".write(json.dumps(rec))\n")


def probe_cmd(out):
    return ["--no-python", PYTHON, "-c", PROBE, str(out)]


def records(out, n):
    return [json.loads((out / f"{i}.json").read_text()) for i in range(n)]


def c10d_args():
    return ["run", "--nnodes", "1", "--nproc-per-node", "2",
            "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
            "--local-addr", "127.0.0.1"]


def test_c10d_rank0_agent_serves_the_workers_store(run_agent, tmp_path):
    r = run_agent(c10d_args() + probe_cmd(tmp_path))
    assert r.returncode == 0, r.stderr
    recs = records(tmp_path, 2)
    for rec in recs:
        assert rec["TORCHELASTIC_USE_AGENT_STORE"] == "True"
        assert rec["MASTER_ADDR"] == "127.0.0.1"
        assert rec["served"], rec
    assert len({rec["MASTER_PORT"] for rec in recs}) == 1
    assert "serving the workers' TCPStore on 127.0.0.1:" + \
        recs[0]["MASTER_PORT"] in r.stderr


@pytest.mark.parametrize("how", [
    {"args": ["--worker-store", "worker"]},
    {"env": {"DISTJOB_WORKER_STORE": "worker"}},
    {"env": {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}},
], ids=["flag", "distjob-env", "torch-env"])
def test_opt_outs_go_back_to_worker_rank0(run_agent, tmp_path, how):
    args = c10d_args()
    r = run_agent(args[:1] + how.get("args", []) + args[1:]
                  + probe_cmd(tmp_path), env=how.get("env"))
    assert r.returncode == 0, r.stderr
    for rec in records(tmp_path, 2):
        assert rec["TORCHELASTIC_USE_AGENT_STORE"] == "False"
        assert not rec["served"], rec  # worker rank 0 would host it
    assert "serving the workers' TCPStore" not in r.stderr


def test_flag_beats_torch_opt_out(run_agent, tmp_path):
    args = c10d_args()
    r = run_agent(args[:1] + ["--worker-store", "agent"] + args[1:]
                  + probe_cmd(tmp_path),
                  env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})
    assert r.returncode == 0, r.stderr
    assert all(rec["TORCHELASTIC_USE_AGENT_STORE"] == "True" and rec["served"]
               for rec in records(tmp_path, 2))


@pytest.mark.parametrize("where", [["--worker-store", "both"],
                                   ["env", "DISTJOB_WORKER_STORE"]])
def test_bad_value_exits_2_naming_the_flag(run_agent, where):
    if where[0] == "env":
        r = run_agent(["run", "--", "true"],
                      env={"DISTJOB_WORKER_STORE": "both"}, timeout=10)
        name = "DISTJOB_WORKER_STORE"
    else:
        r = run_agent(["run", *where, "--", "true"], timeout=10)
        name = "--worker-store"
    assert r.returncode == 2
    assert name in r.stderr and "agent, worker" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_standalone_serves_on_localhost(run_agent, tmp_path):
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2"]
                  + probe_cmd(tmp_path))
    assert r.returncode == 0, r.stderr
    recs = records(tmp_path, 2)
    assert all(rec["TORCHELASTIC_USE_AGENT_STORE"] == "True" and rec["served"]
               and rec["MASTER_ADDR"] == "127.0.0.1" for rec in recs)


def test_static_node0_serves_on_master_port(start_agent, tmp_path):
    # torchrun's static store is the workers' on every node, and its
    # opt-out is for the dynamic backends only.
    port = free_port()
    agents = []
    for rank in (1, 0):
        out = tmp_path / str(rank)
        out.mkdir()
        agents.append(start_agent(
            ["run", "--nnodes", "2", "--node-rank", str(rank),
             "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
             "--master-port", str(port)] + probe_cmd(out),
            env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
                 "DISTJOB_TERMINATION_LOG": str(tmp_path / f"t{rank}")}))
    assert [a.wait(timeout=60) for a in agents] == [0, 0]
    recs = [json.loads(next((tmp_path / str(rank)).glob("*.json"))
                       .read_text()) for rank in (0, 1)]
    for rec in recs:
        assert rec["TORCHELASTIC_USE_AGENT_STORE"] == "True"
        assert rec["MASTER_PORT"] == str(port)
    # Node 0's agent listens there while its workers run; node 1 may probe
    # before node 0 started, so only node 0's probe is certain.
    assert recs[0]["served"]


# A 1.13 client's ADD from a source address that is not 127.0.0.1, so an
# admission list of loopback alone would refuse it.
FROM_ELSEWHERE = (
    "import os, socket, struct, sys\n"
    "e = os.environ\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.5', 0))\n"
    "s.settimeout(10)\n"
    "s.connect((e['MASTER_ADDR'], int(e['MASTER_PORT'])))\n"
    "s.sendall(bytes([3]) + struct.pack('=Q', 2) + b'/n'"
    " + struct.pack('=q', 5))\n"
    "got = s.recv(8)\n"
    "sys.exit(0 if len(got) == 8 and struct.unpack('=q', got)[0] == 5"
    " else 1)\n")


def test_static_job_with_a_token_admits_other_nodes(start_agent, tmp_path):
    # Only an elastic round has a member list to admit; a static job's
    # store stays open (docs/worker-store.md), or node 0's store would
    # refuse every other node's workers.
    port = free_port()
    a = start_agent(
        ["run", "--nnodes", "2", "--node-rank", "0", "--nproc-per-node", "1",
         "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--no-python", PYTHON, "-c", FROM_ELSEWHERE],
        env={"DISTJOB_RDZV_TOKEN": "s3cret-token",
             "DISTJOB_TERMINATION_LOG": str(tmp_path / "tlog")})
    assert a.wait(timeout=60) == 0


def test_env_agrees_with_run(run_agent):
    args = c10d_args()[1:]
    for extra, env, want in (
            ([], None, "True"),
            (["--worker-store", "worker"], None, "False"),
            ([], {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}, "False")):
        r = run_agent(["env", "--json", "--explain", *extra, *args],
                      env=env, timeout=30)
        assert r.returncode == 0, r.stderr
        worker = json.loads(r.stdout)["workers"][0]
        assert worker["env"]["TORCHELASTIC_USE_AGENT_STORE"] == want
        source = worker["sources"]["TORCHELASTIC_USE_AGENT_STORE"]
        if extra:
            assert source == "flag --worker-store"
        elif env:
            assert source == "env TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"


def test_completion_offers_the_flag(run_agent):
    r = run_agent(["completion", "bash"], timeout=10)
    assert r.returncode == 0, r.stderr
    assert "--worker-store" in r.stdout


def test_metrics_show_the_served_store(start_agent, tmp_path):
    import urllib.request
    from harness import wait_for
    port = free_port()
    go = tmp_path / "go"
    # The worker connects to the agent's store (a connection alone shows as
    # a client), then waits for "go".
    worker = ("import os, socket, time\n"
              "e = os.environ\n"
              "s = socket.create_connection((e['MASTER_ADDR'],"
              " int(e['MASTER_PORT'])))\n"
              f"while not os.path.exists({str(go)!r}): time.sleep(0.05)\n")
    agent = start_agent(["run", "--standalone", "--metrics-port", str(port),
                         "--no-python", PYTHON, "-c", worker])

    def series(text, name):
        return [line.rsplit(" ", 1)[1] for line in text.splitlines()
                if line.startswith(name + "{")]

    def scrape():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                        timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return None
        return text if series(text, "distjob_worker_store_clients") == [
            "1"] else None

    text = wait_for(scrape, timeout=30, interval=0.1,
                    what="a worker store client in /metrics")
    assert series(text, "distjob_worker_store_serving") == ["1"]
    assert series(text, "distjob_worker_store_accept_pauses_total") == ["0"]
    assert series(text, "distjob_worker_store_evictions_total") == ["0"]
    # The client's connection is counted, idle or not (1 KiB of
    # bookkeeping and at most 4 KiB of buffer).
    [held] = series(text, "distjob_worker_store_buffered_bytes")
    assert 1024 <= float(held) <= 2 * (1024 + 4096)
    go.write_text("")
    assert agent.wait(timeout=30) == 0


# Records MASTER_ADDR:MASTER_PORT, then waits for "go": `status` looks at a
# running job.
PARKED = (
    "import os, pathlib, sys, time\n"
    "out = pathlib.Path(sys.argv[1])\n"
    "e = os.environ\n"
    "(out / 'master.tmp').write_text(e['MASTER_ADDR'] + ':'"
    " + e['MASTER_PORT'])\n"
    "(out / 'master.tmp').rename(out / 'master')\n"
    "while not (out / 'go').exists(): time.sleep(0.05)\n")


@pytest.mark.parametrize("how,want", [
    ({"env": {"DISTJOB_RDZV_TOKEN": "s3cret-token"}},
     {"served_by": "agent", "members_only": True, "members_admitted": 1,
      "members_unresolved": 0}),
    ({}, {"served_by": "agent", "members_only": False}),
    ({"args": ["--worker-store", "worker"]},
     {"served_by": "worker", "opted_out_by": "--worker-store worker"}),
    ({"env": {"DISTJOB_WORKER_STORE": "worker"}},
     {"served_by": "worker", "opted_out_by": "DISTJOB_WORKER_STORE=worker"}),
    ({"env": {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}},
     {"served_by": "worker",
      "opted_out_by": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"}),
], ids=["token", "open", "flag", "distjob-env", "torch-env"])
def test_status_shows_who_serves_the_workers_store(
        start_agent, run_agent, tmp_path, how, want):
    from harness import wait_for
    args = c10d_args()
    endpoint = args[args.index("--rdzv-endpoint") + 1]
    env = how.get("env", {})
    agent = start_agent(
        args[:1] + how.get("args", []) + args[1:4] + ["1"] + args[5:]
        + ["--rdzv-id", "sj", "--no-python", PYTHON, "-c", PARKED,
           str(tmp_path)], env=env)
    master = wait_for(lambda: (tmp_path / "master").exists()
                      and (tmp_path / "master").read_text(),
                      timeout=30, interval=0.05, what="the worker's start")
    status = ["status", "--rdzv-endpoint", endpoint, "--rdzv-id", "sj"]
    r = run_agent(status + ["--json"], env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    [job] = json.loads(r.stdout)
    record = job["worker_store"]
    assert record["round"] == job["round"]
    for key, value in want.items():
        assert record[key] == value, record
    text = run_agent(status, env=env, timeout=30)
    assert text.returncode == 0, text.stderr
    if want["served_by"] == "agent":
        assert record["addr"] == master
        assert f"workers' store: served by the agent on {master} " in \
            text.stdout, text.stdout
    else:
        assert "addr" not in record
        assert ("workers' store: worker rank 0 (round 0), opted out by "
                + want["opted_out_by"]) in text.stdout, text.stdout
    # The token is the job's secret: no status output may carry it.
    for token in env.get("DISTJOB_RDZV_TOKEN", "").split():
        assert token not in r.stdout + r.stderr + text.stdout + text.stderr
    (tmp_path / "go").write_text("")
    assert agent.wait(timeout=30) == 0


# Attempt 0 adds 5 to a key of the agent's store (1.13's ADD, 3, over a raw
# socket) and fails; attempt 1 adds 0 and exits with what it read: 0 when
# the store was cleared between the attempts.
STALE = (
    "import os, socket, struct, sys\n"
    "e = os.environ\n"
    "s = socket.create_connection((e['MASTER_ADDR'],"
    " int(e['MASTER_PORT'])), timeout=10)\n"
    "add = 5 if e['TORCHELASTIC_RESTART_COUNT'] == '0' else 0\n"
    "s.sendall(bytes([3]) + struct.pack('=Q', 6) + b'/stale'"
    " + struct.pack('=q', add))\n"
    "got = struct.unpack('=q', s.recv(8))[0]\n"
    "sys.exit(1 if add else got)\n")


@pytest.mark.parametrize("launch", [["--standalone"], []],
                         ids=["standalone", "static-one-node"])
def test_each_attempt_starts_with_a_clean_store(run_agent, launch):
    # 2.x clients use no per-attempt key prefix (PyTorch 2.11's
    # _create_c10d_store): the last attempt's keys would meet the next's.
    r = run_agent(["run", *launch, "--max-restarts", "1",
                   "--restart-policy", "any",
                   "--master-port", str(free_port()),
                   "--no-python", PYTHON, "-c", STALE])
    assert r.returncode == 0, r.stderr
