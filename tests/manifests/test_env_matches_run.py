"""`distjob-agent env --json` shows what `run` gives each worker: for every
pod of every example manifest (the operators' input simulated as in
test_manifests.py) and for a static multi-node PyTorch job, run the agent
with a worker that dumps its environment and compare it, key by key, with
env's output for the same input. Only the values env marks as undecided
(decided at rendezvous or at launch) are left out, and env must mark them
null rather than guess.

Runs stay local and quick: no start barrier, no DNS wait, no health or
metrics port;
an elastic job's rendezvous is narrowed to this one node on a free local
port (PET_NNODES=1, PET_RDZV_ENDPOINT=localhost:0) for both commands.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml


import operators

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))

# Each worker writes its whole environment to <dir>/<LOCAL_RANK>.json.
DUMP = ("import json, os, sys; "
        "open(os.path.join(sys.argv[1], os.environ['LOCAL_RANK'] + '.json'),"
        " 'w').write(json.dumps(dict(os.environ)))")
# What sh and python add to an environment on their own.
SHELL_ADDED = {"PWD", "OLDPWD", "SHLVL", "_"}


def pods():
    docs = {path: [d for d in yaml.safe_load_all(path.read_text())
                   if d and d["kind"] not in ("Service", "NetworkPolicy")]
            for path in MANIFESTS}
    runtimes = {d["metadata"]["name"]: d for found in docs.values()
                for d in found if d["kind"] == "ClusterTrainingRuntime"}
    for path, found in docs.items():
        for pod in (p for job in found
                    for p in operators.pods_of(job, runtimes)):
            # An MPI pod's ranks get their environment from mpirun, not
            # from run: env shows its role and what mpirun is given
            # (test_manifests.py's check_mpi; test_mpi_cli.py runs them).
            if operators.mpi_role(pod):
                continue
            yield pytest.param(pod, id=f"{path.stem}:{pod.name}")


@pytest.fixture(scope="module")
def uts_agent(agent):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("setting the pod hostname needs root and unshare --uts")
    return agent


def as_pod(agent, hostname, args, env, timeout=60):
    return subprocess.run(
        ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
         hostname, agent, *args],
        env=env, capture_output=True, text=True, timeout=timeout)


def compare(hostname, args, env, agent, tmp_path):
    shown = as_pod(agent, hostname, ["env", "--json", *args], env)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    ran = as_pod(agent, hostname,
                 ["run", *args, "--", sys.executable, "-c", DUMP, str(dumps)],
                 env)
    assert ran.returncode == 0, ran.stderr
    assert len(view["workers"]) == len(list(dumps.iterdir()))
    for worker in view["workers"]:
        rank = worker["local_rank"]
        got = json.loads((dumps / f"{rank}.json").read_text())
        undecided = worker.get("undecided", {})
        problems = []
        for key, value in worker["env"].items():
            if value is None:
                if key not in undecided:
                    problems.append(f"{key}: null but not marked undecided")
            elif got.get(key) != value:
                problems.append(f"{key}: env says {value!r}, run gave "
                                f"{got.get(key)!r}")
        for key, value in got.items():
            if key in worker["env"] or key in SHELL_ADDED:
                continue
            if env.get(key) != value:
                problems.append(f"{key}={value!r}: set by run, not shown by "
                                "env")
        for key, why in undecided.items():
            assert why.startswith("decided at"), (key, why)
        assert problems == [], f"{hostname} local_rank {rank}"
    return view


def pod_input(pod, tmp_path):
    args = ["--no-barrier"]
    if pod.volcano_files:
        volcano = tmp_path / "etc-volcano"
        volcano.mkdir()
        for name, content in pod.volcano_files.items():
            (volcano / name).write_text(content)
        args += ["--volcano-dir", str(volcano)]
    env = {"PATH": os.environ["PATH"],
           "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination-log"),
           # Python would otherwise add LC_CTYPE to the worker's own view.
           "PYTHONCOERCECLOCALE": "0",
           "DISTJOB_POD_LABELS_FILE": str(tmp_path / "labels")}
    for content in pod.podinfo.values():
        (tmp_path / "labels").write_text(content)
    env.update(pod.env)
    operators.mount_secrets(pod, env, tmp_path)
    env["DISTJOB_DNS_TIMEOUT"] = "0"
    env["DISTJOB_HEALTH_PORT"] = "0"
    # A fixed port may be taken on a shared machine; these runs serve none.
    env["DISTJOB_METRICS_PORT"] = "0"
    if "PET_RDZV_ENDPOINT" in env:
        env["PET_NNODES"] = "1"
        env["PET_RDZV_ENDPOINT"] = "localhost:0"
    return args, env


@pytest.mark.parametrize("pod", list(pods()))
def test_env_shows_what_run_gives(uts_agent, pod, tmp_path):
    args, env = pod_input(pod, tmp_path)
    view = compare(pod.hostname or pod.name, args, env, uts_agent, tmp_path)
    undecided = view["workers"][0].get("undecided", {})
    if "PET_RDZV_ENDPOINT" in pod.env:
        assert "RANK" in undecided and "MASTER_ADDR" in undecided
        assert "nnodes 1:1" in undecided["RANK"]
    elif pod.env.get("MASTER_ADDR") or pod.layout:
        # The operators' master/worker layout: every rank known up front.
        assert "RANK" not in undecided and "MASTER_PORT" not in undecided
    else:
        # One node: only the local rendezvous' free port is open.
        assert "MASTER_PORT" in undecided and "RANK" not in undecided


def test_static_multi_node_pytorch_job(uts_agent, tmp_path):
    env = {"PATH": os.environ["PATH"],
           "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination-log"),
           "PYTHONCOERCECLOCALE": "0", "DISTJOB_HEALTH_PORT": "0"}
    args = ["--nnodes", "3", "--node-rank", "2", "--nproc-per-node", "2",
            "--master-addr", "node-0.example", "--master-port", "29555",
            "--rdzv-id", "static-job", "--max-restarts", "1"]
    view = compare("node-2", args, env, uts_agent, tmp_path)
    w1 = view["workers"][1]
    assert w1["env"]["RANK"] == "5"
    assert w1["env"]["WORLD_SIZE"] == "6"
    assert w1["env"]["MASTER_ADDR"] == "node-0.example"
    assert set(w1.get("undecided", {})) == {"TORCHELASTIC_ERROR_FILE",
                                            "DISTJOB_OUTER_AGENT",
                                            "DISTJOB_AGENT_INSTANCE",
                                            "TORCH_WORKER_SERVER_SOCKET"}


def test_elastic_values_are_never_invented(agent, tmp_path):
    """2:4 nodes: no rank, size or master exists before the round, in the
    JSON (null, with why) and in the text (a comment, not KEY=VALUE)."""
    env = {"PATH": os.environ["PATH"]}
    args = ["env", "--nnodes", "2:4", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", "store.example:29400", "--nproc-per-node", "2"]
    shown = subprocess.run([agent, *args, "--json"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0, shown.stderr
    worker = json.loads(shown.stdout)["workers"][1]
    for key in ("RANK", "GROUP_RANK", "WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT"):
        assert worker["env"][key] is None
        assert worker["undecided"][key].startswith(
            "decided at rendezvous (nnodes 2:4")
    assert worker["env"]["LOCAL_RANK"] == "1"
    assert worker["env"]["TORCHELASTIC_RUN_ID"] == "none"
    text = subprocess.run([agent, *args], env=env, capture_output=True,
                          text=True, timeout=30).stdout.splitlines()
    assert not any(line.startswith(("RANK=", "WORLD_SIZE=", "MASTER_PORT="))
                   for line in text)
    assert any(line.startswith("# RANK: decided at rendezvous")
               for line in text)
