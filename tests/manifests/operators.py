"""What the job operators inject into each pod of a manifest.

A model of the operators as they document themselves (Volcano v1.9 `env`, `svc`
and `pytorch` plugins; Kubeflow training-operator v1.8 PyTorchJob, TFJob and
MXJob; Kubeflow's MPI Operator v2 MPIJob; the Job controller's Indexed Jobs;
JobSet, LeaderWorkerSet and Kubeflow Trainer v2's torch and MPI plugins, each
at the source cited where it is simulated), enough to give `distjob-agent
env` exactly the input a pod would see: environment, hostname, the
/etc/volcano files and the files an operator mounts (/etc/mpi/hostfile). Anything the model
does not know (an unsimulated plugin, a replica type) raises, so a manifest
never passes by being ignored.
"""

import dataclasses
import json
import re

# The ENTRYPOINT of images built with images/Containerfile.
IMAGE_ENTRYPOINT = ["/usr/local/bin/distjob-agent", "run", "--"]


@dataclasses.dataclass
class Pod:
    name: str            # pod name == hostname
    kind: str            # "volcano" or the Kubeflow kind
    task: str            # Volcano task or lower-case replica type
    index: int
    container: dict      # the container whose exit code the operator reads
    env: dict            # the container's final environment
    volcano_files: dict  # /etc/volcano/<file> -> content (Volcano only)
    spec: dict           # the pod template spec
    # Downward-API files: mount path/file -> content.
    podinfo: dict = dataclasses.field(default_factory=dict)
    # The node layout the controller means (node_rank, nnodes, master_addr,
    # master_port), when the agent should derive it without flags.
    layout: dict = dataclasses.field(default_factory=dict)
    hostname: str = ""   # the kernel hostname when not the pod name
    # The pod's MPI part as its operator means it: "launcher", "worker"
    # (MPIJob), "node" (a Trainer v2 MPI runtime's); "" when none.
    mpi: str = ""
    # Files the operator mounts into the container: absolute path ->
    # content (the MPI operators' /etc/mpi/hostfile).
    files: dict = dataclasses.field(default_factory=dict)


def _annotations_volcano(job, task, index):
    return {"volcano.sh/job-name": job, "volcano.sh/task-spec": task,
            "volcano.sh/task-index": str(index)}


def _field_ref(path, name, annotations, labels=None):
    if path == "metadata.name":
        return name
    m = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", path)
    if m:
        return annotations.get(m.group(1), "")
    m = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
    if m:
        return (labels or {}).get(m.group(1), "")
    raise NotImplementedError(f"fieldRef {path} is not simulated")


def _user_env(container, name, annotations, labels=None):
    env = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
        elif "fieldRef" in item.get("valueFrom", {}):
            env[item["name"]] = _field_ref(
                item["valueFrom"]["fieldRef"]["fieldPath"], name, annotations,
                labels)
        else:
            raise NotImplementedError(f"env source of {item['name']}")
    return env


def _downward_files(spec, container, labels, annotations):
    """The downward-API volumes the container mounts, as kubelet writes
    them: `labels`/`annotations` files of key="value" lines, sorted."""
    files = {}
    mounts = {m["name"]: m["mountPath"]
              for m in container.get("volumeMounts", [])}
    for volume in spec.get("volumes", []):
        if "downwardAPI" not in volume or volume["name"] not in mounts:
            continue
        for item in volume["downwardAPI"]["items"]:
            path = item["fieldRef"]["fieldPath"]
            values = {"metadata.labels": labels,
                      "metadata.annotations": annotations}.get(path)
            if values is None:
                raise NotImplementedError(f"downward API {path}")
            files[f"{mounts[volume['name']]}/{item['path']}"] = "".join(
                f'{k}="{v}"\n' for k, v in sorted(values.items()))
    return files


def volcano_pods(job):
    name = job["metadata"]["name"]
    plugins = job["spec"].get("plugins", {})
    unknown = set(plugins) - {"env", "svc", "pytorch"}
    if unknown:
        raise NotImplementedError(f"Volcano plugins {sorted(unknown)}")
    tasks = job["spec"]["tasks"]
    hosts = {}
    for task in tasks:
        spec = task["template"]["spec"]
        if "hostname" in spec:
            hosts[task["name"]] = [f"{spec['hostname']}.{name}"]
        else:
            hosts[task["name"]] = [f"{name}-{task['name']}-{i}.{name}"
                                   for i in range(task.get("replicas", 1))]
    svc_env, files = {}, {}
    if "svc" in plugins:
        for task, task_hosts in hosts.items():
            upper = task.replace("-", "_").upper()
            svc_env[f"VC_{upper}_HOSTS"] = ",".join(task_hosts)
            svc_env[f"VC_{upper}_NUM"] = str(len(task_hosts))
            files[task.replace("-", "_") + ".host"] = "\n".join(task_hosts)
        files.update(svc_env)  # the whole ConfigMap is mounted
    pt_args = dict(a.lstrip("-").split("=", 1)
                   for a in plugins.get("pytorch", []) or [])
    master = pt_args.get("master", "master")
    worker = pt_args.get("worker", "worker")
    pods = []
    for task in tasks:
        spec = task["template"]["spec"]
        for index in range(task.get("replicas", 1)):
            pod_name = f"{name}-{task['name']}-{index}"
            container = spec["containers"][0]
            annotations = _annotations_volcano(name, task["name"], index)
            env = _user_env(container, pod_name, annotations)
            env.update(svc_env)
            if "env" in plugins:
                env["VK_TASK_INDEX"] = env["VC_TASK_INDEX"] = str(index)
            if "pytorch" in plugins:
                env.update(_volcano_pytorch(name, tasks, master, worker,
                                            pt_args, task["name"], index))
            pods.append(Pod(pod_name, "volcano", task["name"], index,
                            container, env, files if "svc" in plugins else {},
                            spec))
    return pods


def _volcano_pytorch(job, tasks, master, worker, args, task, index):
    replicas = {t["name"]: t.get("replicas", 1) for t in tasks}
    if master not in replicas:
        return {}
    env = {"MASTER_ADDR": f"{job}-{master}-0.{job}",
           "MASTER_PORT": args.get("port", "23456"),
           "WORLD_SIZE": str(replicas[master] + replicas.get(worker, 0))}
    if task == master:
        env["RANK"] = "0"
    elif task == worker:
        env["RANK"] = str(index + 1)
    return env


KUBEFLOW = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorch", "pytorchjob-port",
                   23456),
    "TFJob": ("tfReplicaSpecs", "tensorflow", "tfjob-port", 2222),
    "MXJob": ("mxReplicaSpecs", "mxnet", "mxjob-port", 9091),
}


def _port(spec, container_name, port_name, default):
    for c in spec["containers"]:
        if c["name"] == container_name:
            for p in c.get("ports", []):
                if p.get("name") == port_name:
                    return p["containerPort"]
    return default


def kubeflow_pods(job):
    kind = job["kind"]
    field, container_name, port_name, default_port = KUBEFLOW[kind]
    name = job["metadata"]["name"]
    namespace = job["metadata"].get("namespace", "default")
    specs = job["spec"][field]
    replicas = {rt: s.get("replicas", 1) for rt, s in specs.items()}
    ports = {rt: _port(s["template"]["spec"], container_name, port_name,
                       default_port) for rt, s in specs.items()}
    pods = []
    for rt, rspec in specs.items():
        spec = rspec["template"]["spec"]
        for index in range(replicas[rt]):
            pod_name = f"{name}-{rt.lower()}-{index}"
            # The exit code comes from the default-named container only;
            # a manifest without one fails here.
            matches = [c for c in spec["containers"]
                       if c["name"] == container_name]
            if not matches:
                raise AssertionError(
                    f"{kind} {name}/{rt}: no container named "
                    f"{container_name!r}; the operator reads the exit code "
                    "(and TFJob writes TF_CONFIG) there only")
            container = matches[0]
            env = _user_env(container, pod_name, {})
            if kind == "PyTorchJob":
                env.update(_kubeflow_pytorch(job, name, replicas, ports, rt,
                                             index))
            elif kind == "TFJob":
                env.update(_kubeflow_tf(name, namespace, replicas, ports, rt,
                                        index))
            else:
                env.update(_kubeflow_mx(name, replicas, ports, rt, index))
            pods.append(Pod(pod_name, kind, rt.lower(), index, container,
                            env, {}, spec))
    return pods


def _kubeflow_pytorch(job, name, replicas, ports, rt, index):
    spec = job["spec"]
    env = {"PYTHONUNBUFFERED": "1"}
    nproc = str(spec.get("nprocPerNode", "auto"))
    total = sum(replicas.values())
    if "Master" in replicas:
        env["MASTER_PORT"] = env["PET_MASTER_PORT"] = str(ports["Master"])
        env["MASTER_ADDR"] = env["PET_MASTER_ADDR"] = f"{name}-master-0"
        factor = int(nproc) if nproc.isdigit() else 1
        env["WORLD_SIZE"] = str(total * factor)
        rank = 0 if rt == "Master" else index + 1
        env["RANK"] = env["PET_NODE_RANK"] = str(rank)
    env["PET_NPROC_PER_NODE"] = nproc
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        env["PET_NNODES"] = str(total)
        return env
    if "Worker" not in replicas:
        raise AssertionError(f"PyTorchJob {name}: elastic needs a Worker")
    low = elastic.get("minReplicas", elastic.get("maxReplicas",
                                                 replicas["Worker"]))
    high = elastic.get("maxReplicas", low)
    env["PET_NNODES"] = f"{low}:{high}"
    env["PET_RDZV_ENDPOINT"] = (
        f"{elastic.get('rdzvHost', name + '-worker-0')}:"
        f"{elastic.get('rdzvPort', ports['Worker'])}")
    env["PET_RDZV_BACKEND"] = elastic.get("rdzvBackend", "c10d")
    if "maxRestarts" in elastic:
        env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
    if "rdzvId" in elastic:
        env["PET_RDZV_ID"] = elastic["rdzvId"]
    if "rdzvConf" in elastic:
        env["PET_RDZV_CONF"] = ",".join(f"{c['key']}={c['value']}"
                                        for c in elastic["rdzvConf"])
    return env


def tf_cluster_kubeflow(name, namespace, replicas, ports):
    return {rt.lower(): [f"{name}-{rt.lower()}-{i}.{namespace}.svc:{ports[rt]}"
                         for i in range(n)]
            for rt, n in replicas.items()}


def _kubeflow_tf(name, namespace, replicas, ports, rt, index):
    if sum(replicas.values()) == 1:
        return {}
    config = {"cluster": tf_cluster_kubeflow(name, namespace, replicas, ports),
              "task": {"type": rt.lower(), "index": index},
              "environment": "cloud"}
    return {"TF_CONFIG": json.dumps(config, sort_keys=False)}


def _kubeflow_mx(name, replicas, ports, rt, index):
    env = {"DMLC_PS_ROOT_PORT": str(ports.get("Scheduler", 0)),
           "DMLC_PS_ROOT_URI": (f"{name}-scheduler-0"
                                if "Scheduler" in replicas else ""),
           "DMLC_NUM_SERVER": str(replicas.get("Server", 0)),
           "DMLC_NUM_WORKER": str(replicas.get("Worker", 0)),
           "DMLC_ROLE": rt.lower(), "DMLC_USE_KUBERNETES": "1"}
    if rt == "Worker":
        env["DMLC_WORKER_ID"] = str(index)
    return env


# --- the Job controller: Indexed Jobs -------------------------------------
# kubernetes.io "Indexed Job for Parallel Processing with Static Work
# Assignment" and "Job with Pod-to-Pod Communication": pods <job>-<index>
# with JOB_COMPLETION_INDEX and the annotation
# batch.kubernetes.io/job-completion-index; with spec.subdomain the pod is
# <job>-<index>.<subdomain>.<ns>.svc.cluster.local, and setHostnameAsFQDN
# makes that the kernel hostname.

def indexed_job_pods(job, namespace="default"):
    name = job["metadata"]["name"]
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        raise NotImplementedError(f"Job {name}: not Indexed")
    template = spec["template"]["spec"]
    container = template["containers"][0]
    pods = []
    for index in range(spec["completions"]):
        host = f"{name}-{index}"
        annotations = {"batch.kubernetes.io/job-completion-index": str(index)}
        env = _user_env(container, host, annotations)
        env["JOB_COMPLETION_INDEX"] = str(index)
        sub = template.get("subdomain")
        fqdn = (f"{host}.{sub}.{namespace}.svc.cluster.local"
                if sub and template.get("setHostnameAsFQDN") else host)
        layout = {}
        if sub and "PET_NNODES" in env:
            layout = {"node_rank": index, "nnodes": int(env["PET_NNODES"]),
                      "master_addr": f"{name}-0.{sub}",
                      "master_port": 29500}
        pods.append(Pod(host, "IndexedJob", "", index, container, env, {},
                        template, layout=layout, hostname=fqdn))
    return pods


# --- JobSet ----------------------------------------------------------------
# kubernetes-sigs/jobset api/jobset/v1alpha2 and its controller: the Jobs
# of replicated job <rj> are <js>-<rj>-<jobIndex>, their pods' hostnames
# <js>-<rj>-<jobIndex>-<podIndex> under the subdomain <js>; every pod
# carries the jobset.sigs.k8s.io/* labels (global index = the Jobs of the
# replicated jobs before it plus the job index). JobSet injects no
# environment of its own; the Jobs underneath are Indexed
# (JOB_COMPLETION_INDEX).

def _jobset_pods(js_name, jobset_spec, container_name=None, extra_env=None,
                 pods_per_job=None):
    rjobs = jobset_spec["replicatedJobs"]
    global_replicas = sum(rj.get("replicas", 1) for rj in rjobs)
    pods, offset = [], 0
    for rj in rjobs:
        job_spec = rj["template"]["spec"]
        template = job_spec["template"]["spec"]
        containers = template["containers"]
        if container_name is not None:
            containers = [c for c in containers if c["name"] == container_name]
            if not containers:
                raise AssertionError(f"{js_name}/{rj['name']}: no container "
                                     f"named {container_name!r}")
        container = containers[0]
        replicas = rj.get("replicas", 1)
        per_job = pods_per_job or job_spec.get("completions", 1)
        if isinstance(per_job, dict):
            per_job = per_job[rj["name"]]
        for job_index in range(replicas):
            for pod_index in range(per_job):
                host = f"{js_name}-{rj['name']}-{job_index}-{pod_index}"
                labels = {
                    "jobset.sigs.k8s.io/jobset-name": js_name,
                    "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                    "jobset.sigs.k8s.io/job-index": str(job_index),
                    "jobset.sigs.k8s.io/job-global-index":
                        str(offset + job_index),
                    "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                    "jobset.sigs.k8s.io/global-replicas": str(global_replicas),
                    "jobset.sigs.k8s.io/restart-attempt": "0",
                }
                annotations = {
                    "batch.kubernetes.io/job-completion-index": str(pod_index)}
                env = _user_env(container, host, annotations, labels)
                env["JOB_COMPLETION_INDEX"] = str(pod_index)
                env.update((extra_env or (lambda rj, i: {}))(rj["name"],
                                                              pod_index))
                layout = {"node_rank": (offset + job_index) * per_job
                          + pod_index,
                          "nnodes": global_replicas * per_job,
                          "master_addr":
                              f"{js_name}-{rjobs[0]['name']}-0-0.{js_name}",
                          "master_port": 29500}
                pods.append(Pod(host, "JobSet", rj["name"], pod_index,
                                container, env, {}, template,
                                podinfo=_downward_files(template, container,
                                                        labels, annotations),
                                layout=layout))
        offset += replicas
    return pods


def jobset_pods(jobset):
    return _jobset_pods(jobset["metadata"]["name"], jobset["spec"])


# --- LeaderWorkerSet -------------------------------------------------------
# kubernetes-sigs/lws pkg/utils/pod/pod_utils.go and its docs
# ("Labels, Annotations and Environment Variables"): group g's leader is
# <lws>-<g>, its workers <lws>-<g>-<w> (w = 1..size-1), every container
# gets LWS_LEADER_ADDRESS=<lws>-<g>.<lws>.<ns>, LWS_GROUP_SIZE and
# LWS_WORKER_INDEX (0 for the leader).

def lws_pods(lws, namespace="default"):
    name = lws["metadata"]["name"]
    tmpl = lws["spec"]["leaderWorkerTemplate"]
    size = tmpl["size"]
    pods = []
    for group in range(lws["spec"].get("replicas", 1)):
        for worker in range(size):
            source = tmpl.get("leaderTemplate") if worker == 0 else None
            template = (source or tmpl["workerTemplate"])["spec"]
            container = template["containers"][0]
            host = f"{name}-{group}" if worker == 0 else \
                f"{name}-{group}-{worker}"
            env = _user_env(container, host, {})
            leader = f"{name}-{group}.{name}.{namespace}"
            env.update({"LWS_LEADER_ADDRESS": leader,
                        "LWS_GROUP_SIZE": str(size),
                        "LWS_WORKER_INDEX": str(worker)})
            pods.append(Pod(host, "LeaderWorkerSet", "", worker, container,
                            env, {}, template,
                            layout={"node_rank": worker, "nnodes": size,
                                    "master_addr": leader,
                                    "master_port": 29500}))
    return pods


# --- Kubeflow Trainer v2 ---------------------------------------------------
# kubeflow/trainer pkg/runtime/framework/plugins/torch/torch.go: the
# TrainJob runs as the runtime's JobSet named after the TrainJob; in the
# container `node` the plugin sets PET_NNODES=numNodes, PET_NPROC_PER_NODE,
# PET_NODE_RANK from the annotation batch.kubernetes.io/job-completion-index,
# PET_MASTER_ADDR=<trainjob>-node-0-0.<trainjob> and PET_MASTER_PORT=29500.
# The TrainJob's trainer.args replace the args of the container `node` of
# the replicated job labelled trainjob-ancestor-step=trainer
# (plugins/jobset/builder.go).

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"


def _trainer_job(rj):
    labels = rj["template"].get("metadata", {}).get("labels", {})
    return labels.get(ANCESTOR_LABEL) == "trainer"


def trainjob_pods(trainjob, runtimes):
    name = trainjob["metadata"]["name"]
    ref = trainjob["spec"]["runtimeRef"]
    runtime = runtimes.get(ref["name"])
    if runtime is None:
        raise AssertionError(f"TrainJob {name}: no runtime {ref['name']!r}")
    trainer = trainjob["spec"].get("trainer", {})
    policy = runtime["spec"]["mlPolicy"]
    nnodes = trainer.get("numNodes", policy.get("numNodes", 1))
    jobset_spec = json.loads(json.dumps(runtime["spec"]["template"]["spec"]))
    rjobs = jobset_spec["replicatedJobs"]
    for rj in rjobs:
        if not _trainer_job(rj):
            continue
        for c in rj["template"]["spec"]["template"]["spec"]["containers"]:
            if c["name"] == "node" and "args" in trainer:
                c["args"] = trainer["args"]
    if "mpi" in policy:
        return _trainer_mpi_pods(name, jobset_spec, policy["mpi"], nnodes,
                                 trainer)
    if [rj["name"] for rj in rjobs] != ["node"]:
        raise NotImplementedError(f"runtime {ref['name']}: replicated jobs "
                                  f"{[rj['name'] for rj in rjobs]}")
    nproc = str(trainer.get("numProcPerNode",
                            policy.get("torch", {}).get("numProcPerNode",
                                                        "auto")))

    def torch_env(rjob, index):
        return {"PET_NNODES": str(nnodes), "PET_NPROC_PER_NODE": nproc,
                "PET_NODE_RANK": str(index),
                "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
                "PET_MASTER_PORT": "29500"}

    pods = _jobset_pods(name, jobset_spec, container_name="node",
                        extra_env=torch_env, pods_per_job=nnodes)
    for pod in pods:
        pod.kind = "TrainJob"
    return pods


# kubeflow/trainer pkg/runtime/framework/plugins/mpi/mpi.go (2026-08):
# Open MPI only. The `node` replicated job has numNodes pods (one fewer
# with runLauncherAsNode), the `launcher` one. In the containers named
# `node` of both: the Secret <trainjob>-mpi-ssh-auth at sshAuthMountPath.
# In the launcher's: the ConfigMap <trainjob>-mpi-hostfile at /etc/mpi
# (`hostfile`: each node endpoint <trainjob>-<rjob>-0-<i>.<trainjob>
# "slots=numProcPerNode", the launcher's first with runLauncherAsNode) and
# OMPI_MCA_orte_default_hostfile, _keep_fqdn_hostnames, _set_default_slots
# and OMPI_MCA_plm_rsh_args. The node pods get no variable of its own.
MPI_HOSTFILE = "/etc/mpi/hostfile"


def _trainer_mpi_pods(name, jobset_spec, mpi, nnodes, trainer):
    if mpi.get("mpiImplementation", "OpenMPI") != "OpenMPI":
        raise NotImplementedError("Trainer v2 MPI: only OpenMPI exists")
    rjobs = {rj["name"] for rj in jobset_spec["replicatedJobs"]}
    if rjobs != {"launcher", "node"}:
        raise NotImplementedError(f"Trainer v2 MPI: replicated jobs {rjobs}")
    as_node = mpi.get("runLauncherAsNode", False)
    nodes = max(nnodes - 1, 1) if as_node else nnodes
    slots = trainer.get("numProcPerNode", mpi.get("numProcPerNode", 1))
    endpoints = [f"{name}-node-0-{i}.{name}" for i in range(nodes)]
    if as_node:
        endpoints.insert(0, f"{name}-launcher-0-0.{name}")
    hostfile = "".join(f"{e} slots={slots}\n" for e in endpoints)

    def mpi_env(rjob, index):
        if rjob != "launcher":
            return {}
        return {"OMPI_MCA_orte_default_hostfile": MPI_HOSTFILE,
                "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                "OMPI_MCA_orte_set_default_slots": str(slots),
                "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}

    pods = _jobset_pods(name, jobset_spec, container_name="node",
                        extra_env=mpi_env,
                        pods_per_job={"node": nodes, "launcher": 1})
    ssh = mpi.get("sshAuthMountPath", "/root/.ssh")
    for pod in pods:
        pod.kind = "TrainJob"
        pod.mpi = "launcher" if pod.task == "launcher" else "node"
        _mount(pod, "mpi-ssh-auth", {"secret": {
            "secretName": f"{name}-mpi-ssh-auth"}}, ssh)
        if pod.task == "launcher":
            _mount(pod, "mpi-hostfile", {"configMap": {
                "name": f"{name}-mpi-hostfile"}}, "/etc/mpi")
            pod.files = {MPI_HOSTFILE: hostfile}
    return pods


def _mount(pod, volume, source, path):
    """Adds an operator's volume to this pod's own copy of its spec."""
    pod.spec = json.loads(json.dumps(pod.spec))
    pod.container = next(c for c in pod.spec["containers"]
                         if c["name"] == pod.container["name"])
    pod.spec.setdefault("volumes", []).append({"name": volume, **source})
    pod.container.setdefault("volumeMounts", []).append(
        {"name": volume, "mountPath": path, "readOnly": True})


# --- Kubeflow MPI Operator v2 (kubeflow.org/v2beta1 MPIJob) ----------------
# kubeflow/mpi-operator pkg/controller/mpi_job_controller.go (2026-07),
# operators.md 1.7: the workers are pods <job>-worker-<i>, the launcher a
# batch Job <job>-launcher, each with hostname <job>-worker-<i> or
# <job>-launcher and subdomain <job>. The first container gets
# K_MPI_JOB_ROLE=worker|launcher; a worker container with neither command
# nor args gets `/usr/sbin/sshd -De`. Every pod mounts the Secret
# <job>-ssh at sshAuthMountPath. The launcher mounts the ConfigMap
# <job>-config at /etc/mpi: `hostfile`, one line per worker
# <job>-worker-<i>.<job>.<ns>.svc, "slots=N" (Open MPI) or ":N" (Intel,
# MPICH), the launcher's first with runLauncherAsWorker; and gets, per
# implementation, the variables naming it.

def mpijob_pods(job, namespace="default"):
    name = job["metadata"]["name"]
    spec = job["spec"]
    impl = spec.get("mpiImplementation", "OpenMPI")
    slots = spec.get("slotsPerWorker", 1)
    specs = spec["mpiReplicaSpecs"]
    workers = specs.get("Worker", {}).get("replicas", 0) if "Worker" in \
        specs else 0
    as_worker = spec.get("runLauncherAsWorker", False)
    hosts = ([f"{name}-launcher"] if as_worker else []) + \
        [f"{name}-worker-{i}" for i in range(workers)]
    line = "{} slots={}\n" if impl == "OpenMPI" else "{}:{}\n"
    hostfile = "".join(line.format(f"{h}.{name}.{namespace}.svc", slots)
                       for h in hosts)
    launcher_env = {"K_MPI_JOB_ROLE": "launcher"}
    launcher_env.update({
        "OpenMPI": {"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                    "OMPI_MCA_orte_default_hostfile": MPI_HOSTFILE,
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                    "OMPI_MCA_orte_set_default_slots": str(slots)},
        "Intel": {"I_MPI_HYDRA_HOST_FILE": MPI_HOSTFILE,
                  "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS":
                      "-o ConnectionAttempts=10",
                  "I_MPI_PERHOST": str(slots)},
        "MPICH": {"HYDRA_HOST_FILE": MPI_HOSTFILE,
                  "HYDRA_LAUNCH_EXTRA_ARGS": "-o ConnectionAttempts=10"},
    }[impl])
    if not as_worker:
        launcher_env.update({"NVIDIA_VISIBLE_DEVICES": "",
                             "NVIDIA_DRIVER_CAPABILITIES": ""})
    unknown = set(specs) - {"Launcher", "Worker"}
    if unknown:
        raise NotImplementedError(f"MPIJob replica types {sorted(unknown)}")
    pods = []
    for rt, rspec in specs.items():
        for index in range(rspec.get("replicas", 1)):
            host = f"{name}-launcher" if rt == "Launcher" else \
                f"{name}-worker-{index}"
            template = json.loads(json.dumps(rspec["template"]["spec"]))
            container = template["containers"][0]
            if rt == "Worker" and not container.get("command") and \
                    not container.get("args"):
                container["command"] = ["/usr/sbin/sshd", "-De"]
            env = _user_env(container, host, {})
            if rt == "Launcher":
                env.update(launcher_env)
            else:
                env["K_MPI_JOB_ROLE"] = "worker"
            pod = Pod(host, "MPIJob", rt.lower(), index, container, env, {},
                      template)
            pod.mpi = "launcher" if rt == "Launcher" else "worker"
            _mount(pod, "ssh-auth", {"secret": {"secretName": f"{name}-ssh"}},
                   spec.get("sshAuthMountPath", "/root/.ssh"))
            if rt == "Launcher":
                _mount(pod, "mpi-job-config", {"configMap": {
                    "name": f"{name}-config"}}, "/etc/mpi")
                pod.files = {MPI_HOSTFILE: hostfile}
            pods.append(pod)
    return pods


# The task names of Volcano's MPI examples, and the role the agent gives
# each with no flags (docs/mpi.md).
MPI_ROLES = {"mpimaster": "launcher", "mpiworker": "worker"}

# The label each operator puts on every pod of a job, naming the job (what
# an MPI example's NetworkPolicy selects the job's pods by).
JOB_LABELS = {"volcano": "volcano.sh/job-name",
              "MPIJob": "training.kubeflow.org/job-name",
              "TrainJob": "jobset.sigs.k8s.io/jobset-name"}


def mpi_role(pod):
    """The MPI role the agent should give a pod: a Volcano MPI example's
    by its task; an MPIJob's as K_MPI_JOB_ROLE says; a Trainer v2 MPI
    runtime's launcher, and its nodes (which say so with flags: nothing of
    the plugin's marks them); else None."""
    if pod.kind == "volcano":
        return MPI_ROLES.get(pod.task)
    return {"launcher": "launcher", "worker": "worker",
            "node": "worker"}.get(pod.mpi)


def pods_of(manifest, runtimes=None):
    if manifest["apiVersion"].startswith("batch.volcano.sh/"):
        return volcano_pods(manifest)
    if manifest["kind"] in KUBEFLOW:
        return kubeflow_pods(manifest)
    if manifest["apiVersion"] == "kubeflow.org/v2beta1" and \
            manifest["kind"] == "MPIJob":
        return mpijob_pods(manifest)
    if manifest["apiVersion"] == "batch/v1" and manifest["kind"] == "Job":
        return indexed_job_pods(manifest)
    if manifest["apiVersion"].startswith("jobset.x-k8s.io/"):
        return jobset_pods(manifest)
    if manifest["apiVersion"].startswith("leaderworkerset.x-k8s.io/"):
        return lws_pods(manifest)
    if manifest["kind"] == "TrainJob":
        return trainjob_pods(manifest, runtimes or {})
    if manifest["kind"] == "ClusterTrainingRuntime":
        return []  # a template: its pods are the TrainJobs'
    raise NotImplementedError(f"{manifest['apiVersion']} {manifest['kind']}")


def container_argv(container):
    """What the container runs: command replaces the image ENTRYPOINT, args
    replace its CMD (the images built here set no CMD)."""
    command = container.get("command", IMAGE_ENTRYPOINT)
    return list(command) + list(container.get("args", []))


def secret_mounts(pod):
    """mountPath -> Secret name for each Secret volume the container mounts."""
    secrets = {v["name"]: v["secret"]["secretName"]
               for v in pod.spec.get("volumes") or [] if "secret" in v}
    return {m["mountPath"]: secrets[m["name"]]
            for m in pod.container.get("volumeMounts") or []
            if m["name"] in secrets}


def mount_files(pod, env, root):
    """Simulates the operators' ConfigMap volumes: each file of pod.files
    is written under `root`, and a value of `env` naming it redirected
    there (the MPI operators' OMPI_MCA_orte_default_hostfile)."""
    for path, content in pod.files.items():
        target = root / "files" / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        for key, value in list(env.items()):
            if value == path:
                env[key] = str(target)


def mpi_hostfile_hosts(pod):
    """The hosts of the hostfile the operator mounted, as mpirun reads
    them: each line's first word, a Hydra `:N` dropped."""
    text = pod.files.get(MPI_HOSTFILE, "")
    return [line.split()[0].split(":")[0] for line in text.splitlines()
            if line.strip()]


def mount_secrets(pod, env, root):
    """Simulates the kubelet's Secret volumes: a value of `env` naming a
    file under a mounted Secret is redirected to a file under `root`
    holding a test secret, as the pod would find it."""
    for key, value in list(env.items()):
        for path in secret_mounts(pod):
            if value.startswith(path.rstrip("/") + "/"):
                target = root / "secrets" / value.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("manifest-test-secret\n")
                env[key] = str(target)
