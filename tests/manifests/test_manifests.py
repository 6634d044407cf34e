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
import re
import shutil
import subprocess

import pytest
import yaml


import operators

ROOT = pathlib.Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))
TF_ROLES = {"ps": "ps", "worker": "worker", "chief": "chief",
            "master": "chief", "evaluator": "evaluator"}
RETRYABLE_PORTABLE = 138  # retried by every Kubeflow version (docs/kubernetes.md: "Exit-code policy per operator")


def load_all(path):
    # A headless Service may come with the job it names the pods for, a
    # Trainer v2 runtime with a TrainJob that uses it, a NetworkPolicy with
    # an MPI job (spawn_policy_problems).
    return [d for d in yaml.safe_load_all(path.read_text())
            if d and d["kind"] not in ("Service", "NetworkPolicy")]


def load(path):
    """The file's job: its one document, or the one beside its runtime."""
    docs = load_all(path)
    jobs = [d for d in docs if d["kind"] != "ClusterTrainingRuntime"]
    assert len(docs) == 1 or len(jobs) == 1, f"{path.name}: one job per file"
    return jobs[0] if len(docs) > 1 else docs[0]


def runtimes():
    """The Trainer v2 runtimes among the examples, by name."""
    return {d["metadata"]["name"]: d for path in MANIFESTS
            for d in load_all(path) if d["kind"] == "ClusterTrainingRuntime"}


def all_pods():
    for path in MANIFESTS:
        for pod in operators.pods_of(load(path), runtimes()):
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


FAILJOB = set(range(1, 128))


def pod_failure_action(policy, exit_code, conditions=()):
    """The Job controller's podFailurePolicy: the first rule that matches
    (onExitCodes: In/NotIn, exit code 0 never matching; onPodConditions)
    decides; none -> Count (kubernetes.io "Handling retriable and
    non-retriable pod failures with Pod failure policy")."""
    for rule in (policy or {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes is not None and exit_code is not None and exit_code != 0:
            inside = exit_code in codes["values"]
            if inside == (codes["operator"] == "In"):
                return rule["action"]
        for cond in rule.get("onPodConditions", []):
            if cond["type"] in conditions:
                return rule["action"]
    return "Count"


def job_policy_problems(where, job_spec):
    problems = []
    if job_spec["template"]["spec"].get("restartPolicy") != "Never":
        problems.append(f"{where}: restartPolicy is not Never (a "
                        "podFailurePolicy needs it)")
    policy = job_spec.get("podFailurePolicy")
    for code in range(1, 256):
        action = pod_failure_action(policy, code)
        want = {"FailJob"} if code in FAILJOB else {"Count", "Ignore"}
        if action not in want:
            problems.append(f"{where}: exit {code} -> {action}")
    if pod_failure_action(policy, None, ("DisruptionTarget",)) != "Ignore":
        problems.append(f"{where}: a disruption is not ignored")
    # Kubernetes >= 1.34 in-place restarts: retryable codes only.
    for c in job_spec["template"]["spec"]["containers"]:
        for rule in c.get("restartPolicyRules", []):
            codes = rule["exitCodes"]
            restarted = {x for x in range(1, 256)
                         if (x in codes["values"]) ==
                         (codes["operator"] == "In")}
            if rule["action"] == "Restart" and restarted & FAILJOB:
                problems.append(f"{where}: restarts in place on permanent "
                                f"codes {sorted(restarted & FAILJOB)[:3]}")
    return problems


def jobset_policy_problems(where, jobset_spec):
    problems = []
    rules = jobset_spec.get("failurePolicy", {}).get("rules", [])

    def action(reason):
        for rule in rules:
            if reason in rule.get("onJobFailureReasons", [reason]):
                return rule["action"]
        return "RestartJobSet"  # the default: restart up to maxRestarts
    if action("PodFailurePolicy") != "FailJobSet":
        problems.append(f"{where}: a permanent exit does not fail the JobSet")
    if action("BackoffLimitExceeded") not in (
            "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"):
        problems.append(f"{where}: a retryable exit does not restart")
    if jobset_spec.get("failurePolicy", {}).get("maxRestarts", 0) < 1:
        problems.append(f"{where}: maxRestarts < 1")
    for rj in jobset_spec["replicatedJobs"]:
        problems += job_policy_problems(f"{where}/{rj['name']}",
                                        rj["template"]["spec"])
    return problems


def token_problems(pod):
    """A pod whose agent hosts or joins a store of ours (the elastic
    rendezvous, the start barrier of TensorFlow and MXNet) reads the job's
    token from a Secret volume. A Kubeflow TFJob's pods, with the
    operator's TF_CONFIG alone, run no barrier (docs/discovery.md, "Start barrier").
    An MPI pod's spawn server (or rsh, on the launcher) needs it too."""
    framework = pod.env.get("DISTJOB_FRAMEWORK", "pytorch")
    barrier = framework != "pytorch" and bool(pod.volcano_files)
    if "PET_RDZV_ENDPOINT" not in pod.env and not barrier and \
            not operators.mpi_role(pod):
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
    if job["apiVersion"] == "batch/v1":
        return job_policy_problems(job["metadata"]["name"], job["spec"])
    if job["apiVersion"].startswith("jobset.x-k8s.io/"):
        return jobset_policy_problems(job["metadata"]["name"], job["spec"])
    if job["kind"] == "ClusterTrainingRuntime":
        return jobset_policy_problems(job["metadata"]["name"],
                                      job["spec"]["template"]["spec"])
    if job["kind"] == "TrainJob":
        return []  # its runtime's policy (checked there)
    if job["kind"] == "MPIJob":
        return mpijob_policy_problems(job)
    if job["kind"] == "LeaderWorkerSet":
        # Pods always restart: a failed node must restart its whole group
        # for the static rendezvous to form again.
        policy = job["spec"]["leaderWorkerTemplate"].get("restartPolicy")
        if policy != "RecreateGroupOnPodRestart":
            problems.append(f"restartPolicy {policy}, not "
                            "RecreateGroupOnPodRestart")
        return problems
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


def mpijob_policy_problems(job):
    """Kubeflow's MPI Operator v2 classifies no exit code (operators.md
    section 4): the launcher's Job retries any failure, so its retries
    must be bounded (runPolicy.backoffLimit) and each be a new pod
    (Never or ExitCode, which the operator makes Never); the workers
    restart in place, so that a retried launcher finds them serving."""
    problems = []
    specs = job["spec"]["mpiReplicaSpecs"]
    policy = specs["Launcher"].get("restartPolicy")
    if policy not in ("Never", "ExitCode"):
        problems.append(f"Launcher: restartPolicy {policy}, not Never")
    backoff = job["spec"].get("runPolicy", {}).get("backoffLimit")
    if not isinstance(backoff, int) or backoff < 1:
        problems.append(f"runPolicy.backoffLimit {backoff}: retries of the "
                        "launcher (138: a worker that never answered) "
                        "unbounded or none")
    policy = specs.get("Worker", {}).get("restartPolicy")
    if policy != "OnFailure":
        problems.append(f"Worker: restartPolicy {policy}, not OnFailure (a "
                        "failed worker would stay down for every retry)")
    return problems


@pytest.mark.parametrize("path, pod", list(all_pods()))
def test_pod_runs_the_agent_with_probes(path, pod):
    assert (entrypoint_problems(pod) + probe_problems(pod) +
            token_problems(pod)) == []


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_exit_code_policy_matches_the_operator(path):
    for doc in load_all(path):
        assert exit_policy_problems(doc) == []


def probe_ports(pod):
    return {probe[kind]["port"] for probe in
            (pod.container.get(p) for p in ("readinessProbe",
                                            "livenessProbe"))
            if probe for kind in ("grpc", "httpGet") if kind in probe}


def spawn_policy_problems(policies, label, open_ports):
    """Problems with how `policies` (the file's NetworkPolicies) guard an
    MPI job's pods, whose spawn servers run commands: one selects the pods
    by the operator's job `label`, and lets in from anywhere only
    `open_ports` (the probes'), everything else from the job's pods only
    (MPI's own traffic between ranks uses ports it picks)."""
    selecting = [p["spec"] for p in policies
                 if p["spec"].get("podSelector", {}).get("matchLabels")
                 == label]
    if not selecting:
        return [f"no NetworkPolicy selects the job's pods by {label}"]
    problems = []
    for spec in selecting:
        if "Ingress" not in spec.get("policyTypes", []):
            problems.append("the NetworkPolicy does not restrict ingress")
        anyone = set()
        for rule in spec.get("ingress", []):
            ports = {p.get("port") for p in rule.get("ports", [])}
            if "from" in rule:
                if rule["from"] != [{"podSelector": {"matchLabels": label}}]:
                    problems.append(f"a rule lets in {rule['from']}")
            elif not ports:
                problems.append("a rule lets anyone reach every port")
            else:
                anyone |= ports
        if anyone - open_ports:
            problems.append(f"ports {sorted(anyone - open_ports)} are open "
                            "to anyone")
        if open_ports - anyone:
            problems.append(f"the probes' ports {sorted(open_ports - anyone)}"
                            " are closed to the kubelet")
    return problems


def mpi_manifests():
    for path in MANIFESTS:
        pods = [p for p in operators.pods_of(load(path), runtimes())
                if operators.mpi_role(p)]
        if pods:
            yield pytest.param(path, pods, id=path.stem)


@pytest.mark.parametrize("path, pods", mpi_manifests())
def test_only_the_jobs_pods_reach_an_mpi_jobs_spawn_servers(path, pods):
    label = {operators.JOB_LABELS[pods[0].kind]: load(path)["metadata"]["name"]}
    policies = [d for d in yaml.safe_load_all(path.read_text())
                if d and d["kind"] == "NetworkPolicy"]
    opened = set().union(*(probe_ports(p) for p in pods))
    assert spawn_policy_problems(policies, label, opened) == []


def test_spawn_policy_checks_catch_an_open_port():
    label = {"volcano.sh/job-name": "mj"}
    good = {"spec": {"podSelector": {"matchLabels": label},
                     "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector":
                                            {"matchLabels": label}}]},
                                 {"ports": [{"port": 8081}]}]}}
    assert spawn_policy_problems([good], label, {8081}) == []
    assert spawn_policy_problems([good], {"volcano.sh/job-name": "x"},
                                 {8081})
    everyone = copy.deepcopy(good)
    everyone["spec"]["ingress"][1] = {}
    assert spawn_policy_problems([everyone], label, {8081})
    spawn_open = copy.deepcopy(good)
    spawn_open["spec"]["ingress"][1]["ports"].append({"port": 29522})
    assert spawn_policy_problems([spawn_open], label, {8081})
    no_probes = copy.deepcopy(good)
    del no_probes["spec"]["ingress"][1]
    assert spawn_policy_problems([no_probes], label, {8081})


def test_every_required_example_exists():
    kinds = {(load(p)["kind"], p.stem) for p in MANIFESTS}
    stems = {stem for _, stem in kinds}
    assert {"volcano-tensorflow", "volcano-pytorch", "volcano-mxnet",
            "kubeflow-pytorchjob-elastic", "kubeflow-tfjob",
            "volcano-pytorch-initcontainer", "job-indexed-pytorch",
            "job-indexed-inplace-restart", "jobset-pytorch", "lws-pytorch",
            "trainer-v2-runtime", "trainer-v2-trainjob",
            "volcano-tensorflow-workers", "volcano-mpi", "mpijob-v2",
            "trainer-v2-mpi"} <= stems
    assert ("MPIJob", "mpijob-v2") in kinds
    assert ("TrainJob", "trainer-v2-mpi") in kinds
    assert "mpi" in runtimes()["mpi-distjob"]["spec"]["mlPolicy"]
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

    js = load(ROOT / "examples/k8s/jobset-pytorch.yaml")
    no_fail = copy.deepcopy(js)
    no_fail["spec"]["failurePolicy"]["rules"] = no_fail["spec"][
        "failurePolicy"]["rules"][1:]
    assert exit_policy_problems(no_fail)
    retry_all = copy.deepcopy(js)
    retry_all["spec"]["replicatedJobs"][0]["template"]["spec"][
        "podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] = [1]
    assert exit_policy_problems(retry_all)
    inplace = load(ROOT / "examples/k8s/job-indexed-inplace-restart.yaml")
    restart_all = copy.deepcopy(inplace)
    restart_all["spec"]["template"]["spec"]["containers"][0][
        "restartPolicyRules"][0]["exitCodes"] = {"operator": "NotIn",
                                                 "values": [0]}
    assert exit_policy_problems(restart_all)
    lws = load(ROOT / "examples/k8s/lws-pytorch.yaml")
    lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "None"
    assert exit_policy_problems(lws)

    mj = load(ROOT / "examples/k8s/mpijob-v2.yaml")
    # A worker left to the image's ENTRYPOINT gets the operator's sshd.
    sshd = copy.deepcopy(mj)
    del sshd["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"][0]["command"]
    worker = [p for p in operators.pods_of(sshd) if p.task == "worker"][0]
    assert entrypoint_problems(worker)
    for change in ({"Launcher": "OnFailure"}, {"Worker": "Never"}):
        broken = copy.deepcopy(mj)
        for rt, policy in change.items():
            broken["spec"]["mpiReplicaSpecs"][rt]["restartPolicy"] = policy
        assert exit_policy_problems(broken)
    unbounded = copy.deepcopy(mj)
    del unbounded["spec"]["runPolicy"]["backoffLimit"]
    assert exit_policy_problems(unbounded)
    no_token = copy.deepcopy(worker)
    no_token.container["command"] = ["/usr/local/bin/distjob-agent", "run"]
    del no_token.env["DISTJOB_RDZV_TOKEN_FILE"]
    assert token_problems(no_token)


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


def run_env(agent, pod, tmp_path):
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
           "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination-log"),
           # This machine's own file, never a pod's.
           "DISTJOB_POD_LABELS_FILE": str(tmp_path / "no-labels")}
    for path, content in pod.podinfo.items():
        # The agent reads the labels where the manifest mounts them.
        assert path == pod.env.get("DISTJOB_POD_LABELS_FILE",
                                   "/etc/podinfo/labels"), path
        (tmp_path / "labels").write_text(content)
    env.update(pod.env)
    if pod.podinfo:
        env["DISTJOB_POD_LABELS_FILE"] = str(tmp_path / "labels")
    operators.mount_secrets(pod, env, tmp_path)
    operators.mount_files(pod, env, tmp_path)
    # The peers' names exist only in the cluster's DNS; this test checks what
    # the agent derives from the operator's input, so it does not wait for
    # them (tests/integration/test_discovery.py covers the DNS wait).
    env["DISTJOB_DNS_TIMEOUT"] = "0"
    return subprocess.run(
        ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
         pod.hostname or pod.name, agent, "env", "--json", "--explain",
         *extra, *rest],
        env=env, capture_output=True, text=True, timeout=30)


def agent_env(agent, pod, tmp_path):
    result = run_env(agent, pod, tmp_path)
    assert result.returncode == 0, (
        f"{pod.name}: distjob-agent env exited {result.returncode}: "
        f"{result.stderr}")
    out = json.loads(result.stdout)
    # The worker's environment: inherited, overlaid with what the agent set
    # (an MPI pod has none: mpirun builds its ranks' environment).
    merged = [dict(pod.env, **w["env"]) for w in out.get("workers", [])]
    return out, merged


def expected_tf_cluster_volcano(pod):
    cluster = {}
    for name, content in pod.volcano_files.items():
        if name.endswith(".host"):
            role = TF_ROLES.get(name[:-len(".host")])
            if role:
                cluster[role] = [f"{h}:2222" for h in content.split("\n")]
    return cluster


def expected_framework(pod):
    if "DISTJOB_FRAMEWORK" in pod.env:
        return pod.env["DISTJOB_FRAMEWORK"]
    if operators.mpi_role(pod):
        return "mpi"
    hosts = {n for n in pod.volcano_files if n.endswith(".host")}
    if hosts == {"worker.host"}:
        # TF workers only (MultiWorkerMirroredStrategy): --framework auto
        # takes them for TensorFlow, as Volcano's tensorflow plugin.
        return "tensorflow"
    return "pytorch"


@pytest.mark.parametrize("path, pod", list(all_pods()))
def test_agent_gives_the_framework_environment(env_agent, path, pod,
                                               tmp_path):
    out, merged = agent_env(env_agent, pod, tmp_path)
    framework = expected_framework(pod)
    assert out["framework"] == framework
    if framework == "mpi":
        check_mpi(pod, out["mpi"])
        return
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
    elif pod.layout:
        check_layout(pod, out, merged)
    else:
        check_pytorch(pod, merged)


# Where each operator's pods get their MPI role from, as --explain says.
MPI_ROLE_SOURCES = {
    ("volcano", "launcher"): "Volcano task mpimaster",
    ("volcano", "worker"): "Volcano task mpiworker",
    ("MPIJob", "launcher"): "env K_MPI_JOB_ROLE=launcher (Kubeflow MPIJob v2)",
    ("MPIJob", "worker"): "env K_MPI_JOB_ROLE=worker (Kubeflow MPIJob v2)",
    ("TrainJob", "launcher"): "Trainer v2 MPI launcher (replicated job "
                              "launcher: hostname",
    ("TrainJob", "worker"): "flags --framework mpi --role worker",
}


def check_mpi(pod, mpi):
    """An MPI pod: its role as its operator means it (a Volcano task, an
    MPIJob's K_MPI_JOB_ROLE, a Trainer v2 launcher's replicated job: no
    flags; a Trainer v2 node says it), a worker serving spawns, and a
    launcher reaching the hosts mpirun will: the worker task's through a
    hostfile it writes (Volcano), or those of the operator's
    /etc/mpi/hostfile, kept as it is (Kubeflow MPIJob, Trainer v2), with
    the agent's rsh in both cases."""
    assert mpi["role"] == operators.mpi_role(pod), mpi
    assert MPI_ROLE_SOURCES[pod.kind, mpi["role"]] in mpi["role_source"], mpi
    if mpi["role"] == "worker":
        assert mpi["spawn_server"].endswith(" port 29522"), mpi
        return
    assert mpi["env"]["OMPI_MCA_plm_rsh_agent"].endswith(" rsh"), mpi
    if pod.kind == "volcano":
        workers = pod.volcano_files["mpiworker.host"].split("\n")
        assert mpi["hosts"] == workers, mpi
        assert mpi["hostfile_written"], mpi
        assert "OMPI_MCA_orte_default_hostfile" in mpi["undecided"], mpi
        return
    hosts = operators.mpi_hostfile_hosts(pod)
    assert len(hosts) == 2 and mpi["hosts"] == hosts, mpi
    assert not mpi["hostfile_written"], mpi
    assert "OMPI_MCA_orte_default_hostfile" in mpi["hosts_source"], mpi
    assert "OMPI_MCA_orte_default_hostfile" not in mpi["undecided"], mpi


CONTROLLERS = {"IndexedJob": "indexed-job", "JobSet": "jobset",
               "LeaderWorkerSet": "lws", "TrainJob": "trainer-v2"}


def check_layout(pod, out, merged):
    """The newer controllers: ranks and master as the controller means
    them (operators.py), derived by the agent with no flags."""
    assert out["controller"]["name"] == CONTROLLERS[pod.kind]
    nproc = int(pod.env["PET_NPROC_PER_NODE"])
    assert len(merged) == nproc
    lay = pod.layout
    for local_rank, env in enumerate(merged):
        assert env["GROUP_RANK"] == str(lay["node_rank"])
        assert env["RANK"] == str(lay["node_rank"] * nproc + local_rank)
        assert env["WORLD_SIZE"] == str(lay["nnodes"] * nproc)
        assert env["MASTER_ADDR"] == lay["master_addr"]
        assert env["MASTER_PORT"] == str(lay["master_port"])
    if pod.kind != "TrainJob":
        # --explain names the controller's own input for the rank.
        sources = out["workers"][0]["sources"]
        assert any(word in sources["GROUP_RANK"] for word in
                   ("JOB_COMPLETION_INDEX", "LWS_WORKER_INDEX",
                    "job-global-index")), sources["GROUP_RANK"]


def pod_named(stem, name):
    for pod in operators.pods_of(load(ROOT / "examples/k8s" / stem),
                                 runtimes()):
        if pod.name == name:
            return copy.deepcopy(pod)
    raise KeyError(name)


@pytest.mark.parametrize("stem, name, change, named", [
    ("lws-pytorch.yaml", "lw-0-1", {"LWS_WORKER_INDEX": "2"},
     ["LWS_WORKER_INDEX=2", "LWS_GROUP_SIZE=2"]),
    ("job-indexed-pytorch.yaml", "ij-1", {"JOB_COMPLETION_INDEX": "3"},
     ["JOB_COMPLETION_INDEX=3", "ij-1"]),
    ("job-indexed-pytorch.yaml", "ij-2", {"PET_NNODES": "2"},
     ["JOB_COMPLETION_INDEX=2", "--nnodes 2"]),
    ("jobset-pytorch.yaml", "js-node-1-0", {"JOB_COMPLETION_INDEX": "1"},
     ["hostname 'js-node-1-0'", "JOB_COMPLETION_INDEX=1"]),
    ("trainer-v2-trainjob.yaml", "tj-node-0-1", {"PET_NODE_RANK": "0"},
     ["PET_NODE_RANK=0", "JOB_COMPLETION_INDEX=1"]),
])
def test_contradicting_inputs_exit_2_naming_both(env_agent, tmp_path, stem,
                                                 name, change, named):
    pod = pod_named(stem, name)
    pod.env.update(change)
    result = run_env(env_agent, pod, tmp_path)
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in named:
        assert word in result.stderr


def test_jobset_hostname_that_contradicts_its_labels_exits_2(env_agent,
                                                             tmp_path):
    pod = pod_named("jobset-pytorch.yaml", "js-node-1-0")
    pod.hostname = "js-node-0-0"
    result = run_env(env_agent, pod, tmp_path)
    assert result.returncode == 2, result.stderr
    assert "hostname 'js-node-0-0'" in result.stderr
    assert "job-index" in result.stderr


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


# --- the comments' claims, checked against the agent's own plan ------------
#
# Each manifest with pods states in one comment line what the agent does
# with it beyond the workers' environment, e.g.
#   # Claims: barrier=yes token=yes
# barrier: whether `run` holds the workers at the start barrier; token:
# whether the pods mount the job's token Secret, which the agent then
# presents to a store of its own (the elastic rendezvous, the barrier).
# The prose must agree with the line: a comment that speaks of the start
# barrier or of a Secret needs the claim, and a claim needs its prose.

CLAIMS = re.compile(r"^# Claims: barrier=(yes|no) token=(yes|no)$", re.M)


def claims(path):
    found = CLAIMS.findall(path.read_text())
    assert len(found) == 1, f"{path.name}: one '# Claims:' line wanted"
    return tuple(value == "yes" for value in found[0])


def prose(path):
    return " ".join(line[1:] for line in path.read_text().splitlines()
                    if line.startswith("#") and
                    not line.startswith("# Claims:")).lower()


def prose_problems(path, barrier, token):
    text = prose(path)
    problems = []
    if ("start barrier" in text) != barrier:
        problems.append(f"{path.name}: the comments "
                        f"{'do not ' if barrier else ''}speak of the start "
                        "barrier")
    if ("secret" in text) != token:
        problems.append(f"{path.name}: the comments "
                        f"{'do not ' if token else ''}speak of a Secret")
    return problems


def pods_with_claims():
    for path in MANIFESTS:
        pods = operators.pods_of(load(path), runtimes())
        if pods:
            yield pytest.param(path, pods, id=path.stem)


@pytest.mark.parametrize("path, pods", list(pods_with_claims()))
def test_comments_claim_what_the_agent_does(env_agent, path, pods,
                                            tmp_path):
    barrier, token = claims(path)
    assert prose_problems(path, barrier, token) == []
    for i, pod in enumerate(pods):
        own = tmp_path / str(i)
        own.mkdir()
        out, _ = agent_env(env_agent, pod, own)
        assert out["barrier"]["runs"] == barrier, (pod.name, out["barrier"])
        assert bool(operators.secret_mounts(pod)) == token, pod.name
        assert out["token"]["loaded"] == token, (pod.name, out["token"])
        if token:
            # A Secret the agent loads but presents to nothing is a lie.
            assert out["token"]["used_by"], (pod.name, out["token"])


def test_claim_checks_catch_a_contradiction(tmp_path):
    liar = tmp_path / "liar.yaml"
    liar.write_text("# The pods meet at the agent's start barrier.\n"
                    "# Claims: barrier=no token=no\n")
    assert prose_problems(liar, *claims(liar))
    silent = tmp_path / "silent.yaml"
    silent.write_text("# Claims: barrier=yes token=yes\n")
    assert len(prose_problems(silent, *claims(silent))) == 2
