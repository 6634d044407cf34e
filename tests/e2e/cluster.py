"""A cluster in a box: Volcano-style "pods" as Linux namespaces on one host.

Each pod is a network namespace with its own address on a private bridge, its
own hostname (UTS namespace) `<job>-<task>-<i>`, its own mount namespace
where an overlay over /etc carries `/etc/volcano/<task>.host`, `/etc/hosts`
and an `/etc/resolv.conf` pointing at the cluster DNS, and its own PID
namespace in which the agent runs as PID 1, the way a container ENTRYPOINT
does. The cluster DNS is a dnsmasq in a namespace of its own on the same
bridge; like CoreDNS for a headless Service without publishNotReadyAddresses,
it answers for a pod only once the test marks the pod ready.

The bridge lives in a "switch" namespace and every veth is created directly
between that namespace and a pod's, so no interface, address or route is ever
added to the host's namespace and all traffic stays inside namespaces the
harness created. Teardown (explicit, fixture finalizer, or atexit) kills every
process it started or that lives in one of its namespaces and deletes the
namespaces, which takes the veths, the bridge and the mounts with them.

    cluster = Cluster(job="j", tasks={"master": 1, "worker": 1},
                      artifacts=tmp_path)
    pod = cluster.start_pod("worker", 0, ["run", "--standalone", "--", ...])
    cluster.mark_ready(pod)
    cluster.kill_agent(pod, signal.SIGTERM)
    result = pod.wait(timeout=30)   # exit code, stdout, stderr, termination
                                    # message, error file
    cluster.teardown()

Notes for new scenarios:
- Nothing is ready until the test says so (`mark_ready`, `mark_ready_later`):
  the test plays the kubelet's readiness probe and the endpoints controller.
- Peers' names resolve only through the search path, as in Kubernetes:
  `<job>-<task>-<i>.<job>` becomes `...<job>.default.svc.cluster.local`
  (ndots:5); a resolver that ignores `search` (busybox nslookup) finds nothing.
- As PID 1 of its PID namespace the agent ignores signals it has no handler
  for yet, like a container's PID 1: wait for the workers to be up before
  `kill_agent`. SIGKILL to the agent (`kill_agent(pod, SIGKILL)`) ends the
  whole pod, like a container dying; `kill_pod` also withdraws its record.
- `cut_network(pod)` takes the pod off the network (its eth0 down) while
  its agent and workers run on: a partition, not a death.
- `start_pod(..., entrypoint=[...])` runs another launcher as the pod's
  PID 1 (torchrun as the reference in the same pods).
- Pods of every task exist (namespaces, /etc/volcano) from the start, as the
  Volcano ConfigMap lists every replica; a pod joins later by being started
  later (elastic scale-up).
- A multi-node job is `start_all(lambda pod: [...])` with per-pod arguments;
  the Volcano env (`VC_*_HOSTS`, `VC_TASK_INDEX`) is already in each pod.
- Another controller's pods: `volcano=False` (no /etc/volcano, no VC_*),
  `pod_files=lambda pod: {"mpi/hostfile": ...}` (files under the pod's
  /etc) and `search=[...]` (domains searched before Kubernetes' own, as a
  pod's dnsConfig adds them: MPI Operator v2's `<job>.<ns>.svc.cluster.local`).
- `private_tmp=True`: each pod's TMPDIR (`pod.tmp`) is its own; the other
  pods see an empty tmpfs at that path, as containers do not share /tmp.
"""

import atexit
import dataclasses
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import agent_binary, pid_alive, wait_for

NETNS_DIR = pathlib.Path("/run/netns")
# Prefix of every namespace this harness names: `dje-<creator pid>-<n>-...`,
# so a later run can remove what a crashed (SIGKILLed) run left behind.
PREFIX = "dje"
# Kubernetes' default cluster domain and namespace: the search path a pod's
# resolv.conf gets, under which `<pod>.<job>` resolves.
NAMESPACE = "default"
CLUSTER_DOMAIN = "cluster.local"
SEARCH = [f"{NAMESPACE}.svc.{CLUSTER_DOMAIN}", f"svc.{CLUSTER_DOMAIN}",
          CLUSTER_DOMAIN]
POD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_live = []
_counter = [0]
_lock = threading.Lock()


def _run(args, check=True, **kwargs):
    r = subprocess.run(args, capture_output=True, text=True, timeout=30,
                       **kwargs)
    if check and r.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)} exited {r.returncode}: "
                           f"{r.stderr.strip()}")
    return r


def unavailable_reason():
    """Why namespaces-as-pods cannot work here, or None when they can."""
    if os.geteuid() != 0:
        return "the e2e harness needs root to create network namespaces"
    for tool in ("ip", "unshare", "nsenter", "dnsmasq", "hostname", "mount"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH (see .ci/install-deps)"
    probe = f"{PREFIX}-{os.getpid()}-probe"
    r = _run(["ip", "netns", "add", probe], check=False)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    try:
        r = _run(["ip", "netns", "exec", probe, "unshare", "--uts", "--mount",
                  "--pid", "--fork", "true"], check=False)
        if r.returncode != 0:
            return ("cannot unshare UTS/mount/PID namespaces: "
                    f"{r.stderr.strip()}")
        r = _run(["ip", "-n", probe, "link", "add", "b0", "type", "bridge"],
                 check=False)
        if r.returncode != 0:
            return f"cannot create a bridge in a namespace: {r.stderr.strip()}"
        with tempfile.TemporaryDirectory() as tmp:
            os.mkdir(f"{tmp}/upper")
            os.mkdir(f"{tmp}/work")
            r = _run(["unshare", "--mount", "--propagation", "private",
                      "mount", "-t", "overlay", "overlay", "-o",
                      f"lowerdir=/etc,upperdir={tmp}/upper,"
                      f"workdir={tmp}/work", "/etc"], check=False)
            if r.returncode != 0:
                return ("cannot mount an overlay over /etc in a mount "
                        f"namespace: {r.stderr.strip()}")
    finally:
        _run(["ip", "netns", "del", probe], check=False)
    return None


def remove_stale_namespaces():
    """Deletes namespaces left by harness runs whose process is gone."""
    if not NETNS_DIR.is_dir():
        return
    for entry in NETNS_DIR.iterdir():
        parts = entry.name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        if int(parts[1]) != os.getpid() and not pid_alive(int(parts[1])):
            _kill_in_netns(_netns_inode(entry.name))
            _run(["ip", "netns", "del", entry.name], check=False)


def _netns_inode(name):
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except FileNotFoundError:
        return None


def processes_in_netns(inode):
    """Live pids whose network namespace is `inode`."""
    pids = []
    if inode is None:
        return pids
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino == inode and \
                    pid_alive(int(entry)):
                pids.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return pids


def _kill_in_netns(inode):
    for pid in processes_in_netns(inode):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


@dataclasses.dataclass
class PodResult:
    """What a pod left behind: what Kubernetes would show for its container."""
    name: str
    exit_code: int
    stdout: str
    stderr: str
    termination_message: str  # "" when the agent wrote none
    error_file: dict  # None when the agent wrote none
    artifacts: pathlib.Path
    duration: float  # from start to when the exit was observed (wait)


class Pod:
    def __init__(self, cluster, task, index, ip):
        self.cluster = cluster
        self.task = task
        self.index = index
        self.name = f"{cluster.job}-{task}-{index}"
        self.host = f"{self.name}.{cluster.job}"  # what Volcano env names
        self.fqdn = f"{self.host}.{SEARCH[0]}"
        self.ip = ip
        self.netns = f"{cluster.prefix}-{task}-{index}"
        self.artifacts = cluster.artifacts / self.name
        self.termination_log = self.artifacts / "termination-log"
        self.error_file = self.artifacts / "error.json"
        self.tmp = self.artifacts / "tmp"  # its TMPDIR (private_tmp)
        self.ready = False
        self.proc = None  # `unshare`, the pod's "container runtime"
        self.entrypoint = None  # argv prefix the pod runs, agent by default
        self.started = None
        self._result = None

    # --- process -----------------------------------------------------------

    def agent_pid(self, timeout=10):
        """Host pid of the agent (PID 1 inside the pod), once the pod's setup
        shell has exec'd it."""
        agent = os.path.realpath(self.entrypoint[0])

        def find():
            for pid in _children(self.proc.pid):
                try:
                    if os.readlink(f"/proc/{pid}/exe") == agent:
                        return pid
                except OSError:
                    pass
            return None
        return wait_for(find, timeout, what=f"{self.name}'s agent to start")

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def processes(self):
        """Every live process in the pod's network namespace."""
        return processes_in_netns(self.cluster._inodes.get(self.netns))

    def exec(self, args, timeout=30):
        """Runs a command beside the agent: the pod's network, UTS, mount and
        PID namespaces (like `kubectl exec`)."""
        pid = self.agent_pid()
        return subprocess.run(
            ["nsenter", "-t", str(pid), "--net", "--uts", "--mount", "--pid",
             "--"] + list(args), capture_output=True, text=True,
            timeout=timeout)

    def wait(self, timeout):
        """Waits for the agent to exit and collects what it left."""
        if self._result is None:
            try:
                code = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                raise TimeoutError(
                    f"{self.name} still running after {timeout}s; artifacts "
                    f"in {self.artifacts}\n{self.cluster.logs_text()}") \
                    from None
            self._result = self._collect(code)
        return self._result

    def _collect(self, code):
        # unshare re-raises the signal that killed its child; report it the
        # way a container runtime does (128 + N).
        if code < 0:
            code = 128 - code
        duration = time.monotonic() - self.started
        message = (self.termination_log.read_text(errors="replace")
                   if self.termination_log.exists() else "")
        error = None
        if self.error_file.exists():
            try:
                error = json.loads(self.error_file.read_text())
            except ValueError:
                error = {"unparsable": self.error_file.read_text()}
        result = PodResult(self.name, code,
                           (self.artifacts / "stdout").read_text(
                               errors="replace"),
                           (self.artifacts / "stderr").read_text(
                               errors="replace"),
                           message, error, self.artifacts, duration)
        (self.artifacts / "exit-code").write_text(f"{code}\n")
        return result


class Cluster:
    """One job's pods, their network and their DNS. See the module doc."""

    SUBNET = "10.213.0"
    DNS_IP = f"{SUBNET}.2"

    def __init__(self, job, tasks, artifacts, agent=None, pid_namespace=True,
                 volcano=True, pod_files=None, search=(), private_tmp=False):
        with _lock:
            _counter[0] += 1
            self.prefix = f"{PREFIX}-{os.getpid()}-{_counter[0]}"
        self.job = job
        self.tasks = dict(tasks)
        self.artifacts = pathlib.Path(artifacts)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.agent = agent or agent_binary()
        self.pid_namespace = pid_namespace
        # False: pods of another controller, no /etc/volcano nor VC_*.
        self.volcano = volcano
        # pod -> {path under the pod's /etc: content} (downward-API files).
        self.pod_files = pod_files
        # Domains searched before Kubernetes' own, as a controller's pod
        # dnsConfig adds them (MPI Operator v2: `<job>.<ns>.svc.cluster.local`,
        # so that its pods' bare hostnames resolve).
        self.search = list(search) + SEARCH
        # Each pod's TMPDIR its own, as a container's /tmp is: the other
        # pods see an empty tmpfs there (in their mount namespaces), so a
        # path one pod made under it does not exist in another (what a
        # launcher's private directory is in a real job).
        self.private_tmp = private_tmp
        self._inodes = {}
        self._netns = []
        self._dns = None
        self._timers = []
        self._dns_lock = threading.Lock()
        self._dns_log = self.artifacts / "dnsmasq.log"
        self._hosts_file = self.artifacts / "dns-hosts"
        self.pods = {}
        _live.append(self)
        try:
            self._create_network()
            next_ip = 10
            for task, count in self.tasks.items():
                for i in range(count):
                    pod = Pod(self, task, i, f"{self.SUBNET}.{next_ip}")
                    next_ip += 1
                    self.pods[pod.name] = pod
            for pod in self.pods.values():
                self._create_pod_network(pod)
                self._write_pod_files(pod)
            self._write_dns_hosts()
            self._start_dns()
        except BaseException:
            self.teardown()
            raise

    # --- network and DNS ---------------------------------------------------

    def _add_netns(self, name):
        _run(["ip", "netns", "add", name])
        self._netns.append(name)
        self._inodes[name] = _netns_inode(name)
        _run(["ip", "-n", name, "link", "set", "lo", "up"])

    def _veth(self, netns, index, ip):
        # Created in the switch namespace with the peer born in `netns`:
        # the host's namespace never sees either end.
        port = f"p{index}"
        _run(["ip", "-n", self.switch, "link", "add", port, "type", "veth",
              "peer", "name", "eth0", "netns", netns])
        _run(["ip", "-n", self.switch, "link", "set", port, "master", "br0"])
        _run(["ip", "-n", self.switch, "link", "set", port, "up"])
        _run(["ip", "-n", netns, "addr", "add", f"{ip}/24", "dev", "eth0"])
        _run(["ip", "-n", netns, "link", "set", "eth0", "up"])

    def _create_network(self):
        self.switch = f"{self.prefix}-switch"
        self._add_netns(self.switch)
        _run(["ip", "-n", self.switch, "link", "add", "br0", "type",
              "bridge"])
        _run(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        self.dns_netns = f"{self.prefix}-dns"
        self._add_netns(self.dns_netns)
        self._veth(self.dns_netns, 2, self.DNS_IP)

    def _create_pod_network(self, pod):
        self._add_netns(pod.netns)
        self._veth(pod.netns, int(pod.ip.rsplit(".", 1)[1]), pod.ip)

    def _start_dns(self):
        log = open(self._dns_log, "w")
        self._dns = subprocess.Popen(
            ["ip", "netns", "exec", self.dns_netns, "dnsmasq",
             "--keep-in-foreground",
             "--no-resolv", "--no-hosts", "--no-poll", "--no-negcache",
             "--log-queries", "--log-facility=-", "--user=root",
             f"--pid-file={self.artifacts / 'dnsmasq.pid'}",
             f"--listen-address={self.DNS_IP}", "--bind-interfaces",
             "--port=53", f"--addn-hosts={self._hosts_file}",
             # Authoritative NXDOMAIN for the cluster's names, like CoreDNS;
             # nothing is ever forwarded off the box.
             f"--local=/{CLUSTER_DOMAIN}/", f"--local=/{self.job}/"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        wait_for(lambda: "started, version" in self._dns_log.read_text()
                 or self._dns.poll() is not None, 10, what="dnsmasq to start")
        if self._dns.poll() is not None:
            raise RuntimeError(f"dnsmasq exited {self._dns.returncode}: "
                               f"{self._dns_log.read_text()}")
        self._wait_hosts_read()

    def _write_dns_hosts(self):
        lines = [f"{p.ip} {p.fqdn}" for p in self.pods.values() if p.ready]
        tmp = self._hosts_file.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        os.replace(tmp, self._hosts_file)
        return len(lines)

    def _wait_hosts_read(self):
        # dnsmasq logs "read <file> - N names" after each (re)load.
        marker = f"read {self._hosts_file}"
        before = getattr(self, "_reads", 0)
        self._reads = wait_for(
            lambda: (lambda n: n if n > before else 0)(
                self._dns_log.read_text().count(marker)),
            10, what="dnsmasq to read its hosts file")

    def _reload_dns(self):
        with self._dns_lock:
            self._reload_dns_locked()

    def _reload_dns_locked(self):
        if self._dns is None or self._dns.poll() is not None:
            return  # torn down, or a timer firing during teardown
        self._write_dns_hosts()
        os.kill(self._dns.pid, signal.SIGHUP)
        self._wait_hosts_read()

    def mark_ready(self, pod):
        """Publishes the pod's DNS record (its readiness probe passed)."""
        pod.ready = True
        self._reload_dns()

    def mark_ready_later(self, pod, delay):
        """Publishes the pod's record `delay` seconds from now, as a slow
        readiness probe or a Service created after its pods would. Returns
        the timer; teardown cancels it."""
        timer = threading.Timer(delay, self.mark_ready, args=(pod,))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()
        return timer

    def dns_queries(self):
        """(name, client address) of every query dnsmasq answered so far, in
        order: which peers a pod was still looking for."""
        queries = []
        for line in self._dns_log.read_text().splitlines():
            parts = line.split()
            # dnsmasq: "query[A] NAME from ADDR"
            for i, word in enumerate(parts[:-3]):
                if word.startswith("query[") and parts[i + 2] == "from":
                    queries.append((parts[i + 1], parts[i + 3]))
        return queries

    def mark_not_ready(self, pod):
        """Withdraws the pod's DNS record (it failed, or was deleted)."""
        pod.ready = False
        self._reload_dns()

    # --- pods ----------------------------------------------------------------

    def task_hosts(self, task):
        return [p.host for p in self.pods.values() if p.task == task]

    def volcano_env(self, pod):
        """What Volcano's env and svc plugins inject into every container."""
        env = {"VC_TASK_INDEX": str(pod.index),
               "VK_TASK_INDEX": str(pod.index)}
        for task in self.tasks:
            key = task.replace("-", "_").upper()
            env[f"VC_{key}_HOSTS"] = ",".join(self.task_hosts(task))
            env[f"VC_{key}_NUM"] = str(self.tasks[task])
        return env

    def _write_pod_files(self, pod):
        etc = pod.artifacts / "etc"
        (etc / "volcano").mkdir(parents=True, exist_ok=True)
        (pod.artifacts / ".overlay-work").mkdir(exist_ok=True)
        for path, content in (self.pod_files(pod) if self.pod_files
                              else {}).items():
            (etc / path).parent.mkdir(parents=True, exist_ok=True)
            (etc / path).write_text(content)
        for task in self.tasks if self.volcano else ():
            key = task.replace("-", "_")
            # No trailing newline, as the svc plugin's ConfigMap has it.
            (etc / "volcano" / f"{key}.host").write_text(
                "\n".join(self.task_hosts(task)))
            (etc / "volcano" / f"VC_{key.upper()}_HOSTS").write_text(
                ",".join(self.task_hosts(task)))
            (etc / "volcano" / f"VC_{key.upper()}_NUM").write_text(
                str(self.tasks[task]))
        (etc / "resolv.conf").write_text(
            f"nameserver {self.DNS_IP}\nsearch {' '.join(self.search)}\n"
            "options ndots:5\n")
        # The kubelet's /etc/hosts: the pod itself by FQDN and short name.
        (etc / "hosts").write_text(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n"
            f"{pod.ip}\t{pod.fqdn}\t{pod.name}\n")
        (etc / "hostname").write_text(pod.name + "\n")

    def start_pod(self, task, index, args, env=None, stdin=None,
                  entrypoint=None):
        """Starts the agent as the pod's entrypoint: `distjob-agent ARGS`.
        `entrypoint` (an argv prefix) replaces the agent, e.g. torchrun as
        the reference in the same pod; its first word is the pod's PID 1.

        The agent's environment is what Volcano injects plus `env` (a None
        value removes a name), a minimal PATH, the termination log and error
        file in the pod's artifacts directory. Returns the Pod.
        """
        pod = self.pods[f"{self.job}-{task}-{index}"]
        if pod.proc is not None:
            raise RuntimeError(f"{pod.name} was already started")
        full_env = {"PATH": POD_PATH, "HOME": "/root", "LANG": "C.UTF-8",
                    "HOSTNAME": pod.name,
                    "DISTJOB_TERMINATION_LOG": str(pod.termination_log),
                    "TORCHELASTIC_ERROR_FILE": str(pod.error_file)}
        if self.private_tmp:
            pod.tmp.mkdir(parents=True, exist_ok=True)
            full_env["TMPDIR"] = str(pod.tmp)
        if self.volcano:
            full_env.update(self.volcano_env(pod))
        for name, value in (env or {}).items():
            if value is None:
                full_env.pop(name, None)
            else:
                full_env[name] = value
        pod.entrypoint = list(entrypoint or [self.agent])
        (pod.artifacts / "command").write_text(
            shlex.join(pod.entrypoint + list(args)) + "\n")
        (pod.artifacts / "env").write_text(
            "".join(f"{k}={v}\n" for k, v in sorted(full_env.items())))
        upper = shlex.quote(str(pod.artifacts / "etc"))
        work = shlex.quote(str(pod.artifacts / ".overlay-work"))
        setup = (f"hostname {shlex.quote(pod.name)} && "
                 "mount -t overlay overlay -o "
                 f"lowerdir=/etc,upperdir={upper},workdir={work} /etc"
                 + "".join(f" && {hide}" for hide in self._hide_tmp(pod))
                 + " && exec \"$@\"")
        unshare = ["unshare", "--uts", "--mount", "--propagation", "private",
                   "--kill-child=SIGKILL"]
        if self.pid_namespace:
            unshare += ["--pid", "--fork", "--mount-proc"]
        else:
            unshare += ["--fork"]
        argv = (["nsenter", f"--net={NETNS_DIR / pod.netns}", "--"] + unshare
                + ["sh", "-c", setup, "pod-setup"] + pod.entrypoint
                + list(args))
        out = open(pod.artifacts / "stdout", "w")
        err = open(pod.artifacts / "stderr", "w")
        try:
            pod.started = time.monotonic()
            pod.proc = subprocess.Popen(
                argv, env=full_env, stdout=out, stderr=err,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                start_new_session=True)
        finally:
            out.close()
            err.close()
        return pod

    def _hide_tmp(self, pod):
        """The setup commands that cover the other pods' TMPDIRs in `pod`
        (private_tmp)."""
        if not self.private_tmp:
            return []
        hide = []
        for other in self.pods.values():
            if other is not pod:
                other.tmp.mkdir(parents=True, exist_ok=True)
                hide.append("mount -t tmpfs -o size=1m,mode=0700 tmpfs "
                            + shlex.quote(str(other.tmp)))
        return hide

    def start_all(self, args, env=None, entrypoint=None):
        """Starts every pod; `args` and `env` may be callables of the Pod."""
        for pod in self.pods.values():
            self.start_pod(pod.task, pod.index,
                           args(pod) if callable(args) else args,
                           env=env(pod) if callable(env) else env,
                           entrypoint=entrypoint)
        return list(self.pods.values())

    def kill_agent(self, pod, sig):
        """Sends `sig` to the pod's agent, as the kubelet does to PID 1."""
        os.kill(pod.agent_pid(), sig)

    def stop_all_within(self, pods, grace, slack):
        """SIGTERM to every pod's agent at once, as a node drain does; each
        must exit 143 within `grace` seconds (waited for up to grace +
        `slack`). Returns the results."""
        sent = time.monotonic()
        for pod in pods:
            self.kill_agent(pod, signal.SIGTERM)
        # Only `pods`: others of the job may have exited already, with
        # their own codes (an MPI launcher before its workers are stopped).
        deadline = sent + grace + slack
        results = {pod.name: pod.wait(max(0.0, deadline - time.monotonic()))
                   for pod in pods}
        elapsed = time.monotonic() - sent
        for name, r in results.items():
            assert r.exit_code == 143, (name, r.exit_code, r.stderr[-2000:],
                                        r.artifacts)
        assert elapsed < grace, f"stopped after {elapsed:.1f}s, grace {grace}s"
        return results

    def kill_pod(self, pod):
        """The pod's node dies: SIGKILL to every process in it at once, and
        its DNS record goes (the endpoint is no longer ready)."""
        _kill_in_netns(self._inodes.get(pod.netns))
        if pod.ready:
            self.mark_not_ready(pod)

    def cut_network(self, pod):
        """The pod's node drops off the network while everything in it runs
        on: its interface goes down inside its namespace, so its peers' TCP
        connections get no reset, only silence."""
        _run(["ip", "-n", pod.netns, "link", "set", "eth0", "down"])

    def wait_all(self, timeout):
        """Waits for every started pod (one deadline for all)."""
        deadline = time.monotonic() + timeout
        return {name: pod.wait(max(0.0, deadline - time.monotonic()))
                for name, pod in self.pods.items() if pod.proc is not None}

    def logs_text(self, tail=3000):
        """Every pod's log tail so far: a hung job's story, which CI keeps
        only in the test's failure message."""
        parts = []
        for pod in self.pods.values():
            stderr = pod.artifacts / "stderr"
            text = (stderr.read_text(errors="replace")
                    if stderr.exists() else "")
            parts.append(f"--- {pod.name} (still running: {pod.running()})\n"
                         f"{text[-tail:]}")
        return "\n".join(parts)

    def leftover_processes(self):
        """Processes still alive in any of this cluster's pods."""
        return {p.name: p.processes() for p in self.pods.values()
                if p.processes()}

    # --- teardown ------------------------------------------------------------

    def teardown(self):
        """Kills everything and deletes every namespace. Idempotent."""
        for timer in self._timers:
            timer.cancel()
        for pod in self.pods.values():
            if pod.proc is not None and pod.proc.poll() is None:
                try:
                    os.killpg(pod.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                try:
                    pod.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        if self._dns is not None and self._dns.poll() is None:
            self._dns.kill()
            self._dns.wait(timeout=10)
        for name in reversed(self._netns):
            _kill_in_netns(self._inodes.get(name))
        for name in reversed(self._netns):
            wait_for(lambda: not processes_in_netns(self._inodes.get(name)),
                     10, what=f"processes in {name} to die")
            _run(["ip", "netns", "del", name], check=False)
        self._netns = []
        if self in _live:
            _live.remove(self)

    def namespaces(self):
        return list(self._netns)


@atexit.register
def _teardown_all():
    for cluster in list(_live):
        try:
            cluster.teardown()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
