"""The example manifests, tested: for every pod of every manifest in
examples/k8s, derive what its operator injects (tests/manifests/operators.py),
run `distjob-agent env --json` with exactly that input — environment,
hostname (in a private UTS namespace) and /etc/volcano files (--volcano-dir)
— and assert each worker gets what its framework needs. The pod-level
checks (agent as ENTRYPOINT, probes, exit-code policy) run on their own.
"""

import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import operators  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))
TF_ROLES = {"ps": "ps", "worker": "worker", "chief": "chief",
            "master": "chief", "evaluator": "evaluator"}
RETRYABLE_PORTABLE = 138  # retried by every Kubeflow version (README: "Exit-code policy per operator")


def load(path):
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1, f"{path.name}: one job per file"
    return docs[0]


def all_pods():
    for path in MANIFESTS:
        for pod in operators.pods_of(load(path)):
            yield pytest.param(path, pod, id=f"{path.stem}:{pod.name}")


# --- pod-level checks: each returns the list of problems it found ----------

def entrypoint_problems(pod):
    argv = operators.container_argv(pod.container)
    program = os.path.basename(argv[0])
    if program == "torchrun":
        return []
    if program != "distjob-agent" or argv[1:2] != ["run"]:
        return [f"{pod.name}: runs {argv[:2]}, not `distjob-agent run`"]
    problems = []
    if argv[0] != operators.IMAGE_ENTRYPOINT[0]:
        # The agent comes from an init container: it must install it where
        # the training container looks, on a shared volume.
        directory = os.path.dirname(argv[0])
        installs = [c for c in pod.spec.get("initContainers", [])
                    if c.get("args", c.get("command", []))[-2:]
                    == ["install", directory]]
        if not installs:
            problems.append(f"{pod.name}: nothing installs {argv[0]}")
        for init in installs:
            shared = {m["name"] for m in init.get("volumeMounts", [])
                      if m["mountPath"] == directory}
            mine = {m["name"] for m in pod.container.get("volumeMounts", [])
                    if m["mountPath"] == directory}
            if not shared & mine:
                problems.append(f"{pod.name}: {directory} is not a volume "
                                "shared with the init container")
    return problems


def probe_problems(pod):
    problems = []
    port = pod.env.get("DISTJOB_HEALTH_PORT")
    for probe in ("readinessProbe", "livenessProbe"):
        grpc = pod.container.get(probe, {}).get("grpc")
        if grpc is None:
            problems.append(f"{pod.name}: no gRPC {probe}")
        elif port is None or int(port) != grpc["port"]:
            problems.append(f"{pod.name}: {probe} on port {grpc['port']} "
                            f"but DISTJOB_HEALTH_PORT={port}")
    if pod.container.get("terminationMessagePolicy") is None:
        problems.append(f"{pod.name}: no terminationMessagePolicy")
    # The agent's SIGTERM-to-SIGKILL grace (25 s) must fit inside the pod's.
    if pod.spec.get("terminationGracePeriodSeconds", 30) < 30:
        problems.append(f"{pod.name}: terminationGracePeriodSeconds < 30")
    return problems


def token_problems(pod):
    """A pod whose agent hosts or joins a store of ours (the elastic
    rendezvous, the start barrier of TensorFlow and MXNet) reads the job's
    token from a Secret volume."""
    framework = pod.env.get("DISTJOB_FRAMEWORK", "pytorch")
    if "PET_RDZV_ENDPOINT" not in pod.env and framework == "pytorch":
        return []
    path = pod.env.get("DISTJOB_RDZV_TOKEN_FILE")
    if path is None:
        return [f"{pod.name}: no DISTJOB_RDZV_TOKEN_FILE"]
    if not any(path.startswith(m.rstrip("/") + "/")
               for m in operators.secret_mounts(pod)):
        return [f"{pod.name}: {path} is not in a mounted Secret volume"]
    return []


def exit_policy_problems(job):
    problems = []
    if job["apiVersion"].startswith("batch.volcano.sh/"):
        # Volcano applies the first matching policy and has no code classes:
        # the retryable code must map to a restart before any PodFailed rule.
        for task in job["spec"]["tasks"]:
            policies = task.get("policies") or job["spec"].get("policies", [])
            if task.get("policies"):
                policies = task["policies"] + job["spec"].get("policies", [])
            action = None
            for policy in policies:
                if policy.get("exitCode") == RETRYABLE_PORTABLE or \
                        policy.get("event") in ("PodFailed", "*"):
                    action = policy["action"]
                    break
            if action not in ("RestartJob", "RestartTask", "RestartPod"):
                problems.append(f"task {task['name']}: exit "
                                f"{RETRYABLE_PORTABLE} leads to {action}")
            if task["template"]["spec"].get("restartPolicy") != "Never":
                problems.append(f"task {task['name']}: restartPolicy is not "
                                "Never (kubelet would restart permanent "
                                "failures in place)")
    else:
        field = operators.KUBEFLOW[job["kind"]][0]
        for rt, spec in job["spec"][field].items():
            if spec.get("restartPolicy") != "ExitCode":
                problems.append(f"{rt}: restartPolicy "
                                f"{spec.get('restartPolicy')}, not ExitCode")
    return problems


@pytest.mark.parametrize("path, pod", list(all_pods()))
def test_pod_runs_the_agent_with_probes(path, pod):
    assert (entrypoint_problems(pod) + probe_problems(pod) +
            token_problems(pod)) == []


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_exit_code_policy_matches_the_operator(path):
    assert exit_policy_problems(load(path)) == []


def test_every_required_example_exists():
    kinds = {(load(p)["kind"], p.stem) for p in MANIFESTS}
    stems = {stem for _, stem in kinds}
    assert {"volcano-tensorflow", "volcano-pytorch", "volcano-mxnet",
            "kubeflow-pytorchjob-elastic", "kubeflow-tfjob",
            "volcano-pytorch-initcontainer"} <= stems
    elastic = load(ROOT / "examples/k8s/kubeflow-pytorchjob-elastic.yaml")
    policy = elastic["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (2, 4)


def test_checks_reject_broken_manifests():
    """The checks above are not vacuous: typical mistakes fail them."""
    tf = load(ROOT / "examples/k8s/kubeflow-tfjob.yaml")
    renamed = copy.deepcopy(tf)
    renamed["spec"]["tfReplicaSpecs"]["Worker"]["template"] = copy.deepcopy(
        renamed["spec"]["tfReplicaSpecs"]["Worker"]["template"])
    renamed["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"][0]["name"] = "main"
    with pytest.raises(AssertionError, match="tensorflow"):
        operators.pods_of(renamed)
    on_failure = copy.deepcopy(tf)
    on_failure["spec"]["tfReplicaSpecs"]["PS"]["restartPolicy"] = "OnFailure"
    assert exit_policy_problems(on_failure)

    vc = load(ROOT / "examples/k8s/volcano-pytorch.yaml")
    no_retry = copy.deepcopy(vc)
    no_retry["spec"]["policies"] = [p for p in vc["spec"]["policies"]
                                    if p.get("exitCode") != 138]
    assert exit_policy_problems(no_retry)

    init = load(ROOT / "examples/k8s/volcano-pytorch-initcontainer.yaml")
    pod = operators.pods_of(init)[0]
    no_volume = copy.deepcopy(pod)
    no_volume.container["volumeMounts"] = []
    assert entrypoint_problems(no_volume)
    no_init = copy.deepcopy(pod)
    no_init.spec["initContainers"] = []
    assert entrypoint_problems(no_init)

    elastic_pod = operators.pods_of(
        load(ROOT / "examples/k8s/kubeflow-pytorchjob-elastic.yaml"))[0]
    assert token_problems(elastic_pod) == []
    no_secret = copy.deepcopy(elastic_pod)
    no_secret.spec["volumes"] = []
    assert token_problems(no_secret)
    no_token = copy.deepcopy(elastic_pod)
    del no_token.env["DISTJOB_RDZV_TOKEN_FILE"]
    assert token_problems(no_token)

    wrong_port = copy.deepcopy(pod)
    wrong_port.env["DISTJOB_HEALTH_PORT"] = "9000"
    assert probe_problems(wrong_port)


# --- the agent's view: `distjob-agent env --json` on the derived input -----

@pytest.fixture(scope="module")
def env_agent(agent):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("setting the pod hostname needs root and unshare --uts")
    probe = subprocess.run([agent, "env", "--help"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0 and "unknown command" in probe.stderr:
        pytest.skip("this agent build has no `env` subcommand yet "
                    "(discovery issue not merged)")
    return agent


def agent_env(agent, pod, tmp_path):
    argv = operators.container_argv(pod.container)
    rest = argv[1:] if os.path.basename(argv[0]) == "torchrun" else argv[2:]
    extra = []
    if pod.volcano_files:
        volcano = tmp_path / "etc-volcano"
        volcano.mkdir()
        for name, content in pod.volcano_files.items():
            (volcano / name).write_text(content)
        extra = ["--volcano-dir", str(volcano)]
    env = {"PATH": os.environ["PATH"],
           "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination-log")}
    env.update(pod.env)
    operators.mount_secrets(pod, env, tmp_path)
    # The peers' names exist only in the cluster's DNS; this test checks what
    # the agent derives from the operator's input, so it does not wait for
    # them (tests/integration/test_discovery.py covers the DNS wait).
    env["DISTJOB_DNS_TIMEOUT"] = "0"
    result = subprocess.run(
        ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
         pod.name, agent, "env", "--json", *extra, *rest],
        env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, (
        f"{pod.name}: distjob-agent env exited {result.returncode}: "
        f"{result.stderr}")
    out = json.loads(result.stdout)
    # The worker's environment: inherited, overlaid with what the agent set.
    merged = [dict(pod.env, **w["env"]) for w in out["workers"]]
    return out, merged


def expected_tf_cluster_volcano(pod):
    cluster = {}
    for name, content in pod.volcano_files.items():
        if name.endswith(".host"):
            role = TF_ROLES.get(name[:-len(".host")])
            if role:
                cluster[role] = [f"{h}:2222" for h in content.split("\n")]
    return cluster


@pytest.mark.parametrize("path, pod", list(all_pods()))
def test_agent_gives_the_framework_environment(env_agent, path, pod,
                                               tmp_path):
    out, merged = agent_env(env_agent, pod, tmp_path)
    framework = pod.env.get("DISTJOB_FRAMEWORK", "pytorch")
    assert out["framework"] == framework
    assert out["workers"], f"{pod.name}: no workers"
    if framework == "tensorflow":
        for env in merged:
            config = json.loads(env["TF_CONFIG"])
            if pod.kind == "TFJob":
                # The operator's TF_CONFIG is kept as is.
                assert config == json.loads(pod.env["TF_CONFIG"])
                continue
            assert config["cluster"] == expected_tf_cluster_volcano(pod)
            assert config["task"] == {"type": TF_ROLES[pod.task],
                                      "index": pod.index}
            assert config.get("environment", "cloud") == "cloud"
    elif framework == "mxnet":
        hosts = {n[:-len(".host")]: c.split("\n")
                 for n, c in pod.volcano_files.items() if n.endswith(".host")}
        assert len(merged) == 1
        env = merged[0]
        assert env["DMLC_ROLE"] == pod.task
        assert env["DMLC_PS_ROOT_URI"] == hosts["scheduler"][0]
        assert env["DMLC_PS_ROOT_PORT"] == "9091"
        assert env["DMLC_NUM_SERVER"] == str(len(hosts["server"]))
        assert env["DMLC_NUM_WORKER"] == str(len(hosts["worker"]))
        assert env["DMLC_USE_KUBERNETES"] == "1"
        if pod.task == "worker":
            assert env["DMLC_WORKER_ID"] == str(pod.index)
    else:
        check_pytorch(pod, merged)


def check_pytorch(pod, merged):
    nproc = int(pod.env["PET_NPROC_PER_NODE"]) \
        if pod.env.get("PET_NPROC_PER_NODE", "").isdigit() else None
    if nproc is None:
        nproc = 2 if pod.kind == "PyTorchJob" else 1
    assert len(merged) == nproc
    for local_rank, env in enumerate(merged):
        assert env["LOCAL_RANK"] == str(local_rank)
        assert env["LOCAL_WORLD_SIZE"] == str(nproc)
        if "PET_RDZV_ENDPOINT" in pod.env:
            continue  # elastic: ranks exist only after the rendezvous round
        nnodes = int(pod.env["PET_NNODES"])
        node_rank = int(pod.env["RANK"])  # the operator's node rank
        assert env["GROUP_RANK"] == str(node_rank)
        assert env["RANK"] == str(node_rank * nproc + local_rank)
        assert env["WORLD_SIZE"] == str(nnodes * nproc)
        assert env["MASTER_ADDR"] == pod.env["MASTER_ADDR"]
        assert env["MASTER_PORT"] == pod.env["MASTER_PORT"]


def templates(node):
    """Every pod template (a dict whose spec has containers) anywhere in a
    manifest."""
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and "containers" in spec:
            yield node
        for value in node.values():
            yield from templates(value)
    elif isinstance(node, list):
        for value in node:
            yield from templates(value)


def test_metrics_port_is_declared_and_annotated():
    seen = 0
    for path in MANIFESTS:
        for template in templates(load(path)):
            for c in template["spec"]["containers"]:
                env = {e["name"]: e.get("value") for e in c.get("env", [])
                       if isinstance(e, dict)}
                port = env.get("DISTJOB_METRICS_PORT")
                if port is None:
                    continue
                seen += 1
                ports = {p.get("name"): p["containerPort"]
                         for p in c.get("ports", [])}
                assert ports.get("metrics") == int(port), path.name
                notes = template.get("metadata", {}).get("annotations", {})
                assert notes.get("prometheus.io/scrape") == "true", path.name
                assert notes.get("prometheus.io/port") == port, path.name
                assert notes.get("prometheus.io/path") == "/metrics"
    assert seen >= 1, "no example shows --metrics-port"
