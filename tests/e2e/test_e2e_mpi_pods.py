"""MPI jobs without SSH in namespace pods (issue 41, "How it is shown").

A launcher pod and two worker pods of cluster.py, each with the static
agent as its ENTRYPOINT (PID 1 of the pod), peers' names answered by the
harness's dnsmasq, and no sshd anywhere: a fake `ssh` and `rsh` first on
every pod's PATH fail the job if anything calls them. The launcher runs
Debian's real mpirun: Open MPI 4's `mpirun.openmpi` (tree spawn on, its
default) with an mpi4py allreduce, or MPICH 4's `mpiexec.hydra` with the
same allreduce in C; 4 ranks, 2 on each worker.

The jobs come in the two shapes their controllers give them:

- Kubeflow MPI Operator v2 (MPIJob v2beta1): pods `<job>-launcher-0` and
  `<job>-worker-<i>`, `K_MPI_JOB_ROLE`, `/etc/mpi/hostfile` listing the
  workers' DNS names (`<pod>.<job>.default.svc slots=2`, or `...:2` for
  MPICH) named by `OMPI_MCA_orte_default_hostfile` (`HYDRA_HOST_FILE`,
  `I_MPI_HYDRA_HOST_FILE` for MPICH), and the job's domain searched (the
  operator's dnsConfig). No `publishNotReadyAddresses`: a worker's name
  resolves only once its pod is Ready, i.e. once its agent serves.
- Volcano: tasks `mpimaster` and `mpiworker`, `/etc/volcano/*.host` and
  `VC_*`, no MPI flag on any pod, `PET_NPROC_PER_NODE=2` as in
  examples/k8s/volcano-mpi.yaml; the launcher writes mpirun's hostfile.

Each pod's TMPDIR is its own (private_tmp), as a container's /tmp is. The
faults are met as users meet them, in MPIJob pods: a worker pod started
10 s after the launcher, a worker pod SIGKILLed whole mid-job (node loss),
SIGTERM to the launcher pod mid-job (deletion, eviction).

The suite runs as root (it makes namespaces), so every pod sets Open MPI's
OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM), as `--allow-run-as-root` would; the agent
itself needs no root.
"""

import dataclasses
import re
import signal
import time

import pytest

from harness import (MPI_ALLREDUCE_PY, MPI_EXPECTED, PYTHON,
                     build_mpich_allreduce, mpi_ranks, no_ssh_dir, wait_for)
from cluster import POD_PATH

TOKEN = "mpi-e2e-tok-7Hq2Lp9Zc4"
# The workers' spawn port when none is set (README, "MPI").
SPAWN_PORT = 29522
SPAWN_HEALTH_SERVICE = "distjob.spawn.Spawner"
# From a stop signal forwarded to mpirun to its group's SIGKILL
# (agent/mpi_launcher.cc, kStopGrace; no flag sets it).
STOP_GRACE = 10
# How long a job of this file may take from its launcher's start: each
# takes 2-4 s on 2 busy cores; a hung mpirun costs this much.
JOB_DEADLINE = 30


@dataclasses.dataclass(frozen=True)
class Mpi:
    """One MPI implementation as a launcher pod runs it."""
    launcher: str  # its mpirun
    np_flag: str
    hostfile_line: str  # one worker's /etc/mpi/hostfile line, 2 slots
    # What MPI Operator v2 sets in the launcher for this implementation:
    # the hostfile's variables, and Open MPI's keep_fqdn_hostnames (or
    # Open MPI would strip the hostfile's names to the bare pod names).
    operator_env: tuple
    daemon: str  # what its mpirun has each worker's spawn server run
    tree_spawn: bool  # whether its daemons start other daemons


OPEN_MPI = Mpi(launcher="mpirun.openmpi", np_flag="-np",
               hostfile_line="{} slots=2\n",
               operator_env=(
                   ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
                   ("OMPI_MCA_orte_keep_fqdn_hostnames", "true")),
               daemon="orted", tree_spawn=True)
MPICH = Mpi(launcher="mpiexec.hydra", np_flag="-n", hostfile_line="{}:2\n",
            operator_env=(("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
                          ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile")),
            daemon="hydra_pmi_proxy", tree_spawn=False)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The allreduce as an argv for each MPI: Open MPI's in Python (mpi4py),
    MPICH's in C."""
    directory = tmp_path_factory.mktemp("mpi-programs")
    script = directory / "allreduce.py"
    script.write_text(MPI_ALLREDUCE_PY)
    return {OPEN_MPI: [PYTHON, str(script)],
            MPICH: [str(build_mpich_allreduce(directory))]}


class Job:
    """One MPI job's pods (cluster.py) in `shape` "mpijob" or "volcano":
    what each pod gets, and starting them as their controller would."""

    def __init__(self, make_cluster, artifacts, shape, mpi, program,
                 chain=False):
        self.shape, self.mpi, self.program = shape, mpi, program
        # Open MPI's tree spawn is on by default, but under the default
        # radix (64) mpirun starts both workers' daemons itself. A radix of
        # 1 makes the routing tree a chain: mpirun starts worker 0's orted,
        # which starts worker 1's through `distjob-agent rsh` from worker
        # 0's pod.
        self.chain = chain and mpi.tree_spawn
        self.fake_ssh = no_ssh_dir(artifacts)
        if shape == "mpijob":
            job, launcher, worker = "mj", "launcher", "worker"
            hosts = [f"{job}-{worker}-{i}.{job}.default.svc"
                     for i in range(2)]
            self.hostfile = "".join(mpi.hostfile_line.format(h)
                                    for h in hosts)
            self.cluster = make_cluster(
                job, {launcher: 1, worker: 2}, volcano=False, private_tmp=True,
                pod_files=lambda pod: {"mpi/hostfile": self.hostfile},
                search=[f"{job}.default.svc.cluster.local"])
        else:
            job, launcher, worker = "vj", "mpimaster", "mpiworker"
            self.cluster = make_cluster(job, {launcher: 1, worker: 2},
                                        private_tmp=True)
        self.launcher = self.cluster.pods[f"{job}-{launcher}-0"]
        self.workers = [self.cluster.pods[f"{job}-{worker}-{i}"]
                        for i in range(2)]

    def env(self, pod):
        env = {"DISTJOB_RDZV_TOKEN": TOKEN,
               "PATH": f"{self.fake_ssh}:{POD_PATH}",
               "OMPI_ALLOW_RUN_AS_ROOT": "1",
               "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        if pod is self.launcher:
            # The launcher's wait names the hosts it still misses every
            # second rather than every 15.
            env["DISTJOB_TEST_PROGRESS_INTERVAL_MS"] = "1000"
            if self.chain:
                env["OMPI_MCA_routed_radix"] = "1"
        if self.shape == "volcano":
            # As examples/k8s/volcano-mpi.yaml: the slots of the hostfile
            # the launcher writes.
            env["PET_NPROC_PER_NODE"] = "2"
        else:
            role = "launcher" if pod is self.launcher else "worker"
            env["K_MPI_JOB_ROLE"] = role
            if role == "launcher":
                env.update(self.mpi.operator_env)
        return env

    def start_worker(self, pod):
        """Starts a worker pod; the endpoints controller publishes its name
        once it is Ready (its spawn server serves)."""
        self.cluster.start_pod(pod.task, pod.index, ["run"],
                               env=self.env(pod))
        if self.shape == "volcano":
            # Volcano's svc plugin publishes every pod's name at once, and
            # its agents wait for the names before they serve.
            self.cluster.mark_ready(pod)
            return
        wait_for(lambda: "serving the launcher's spawns" in stderr(pod), 30,
                 interval=0.05, what=f"{pod.name}'s spawn server")
        self.cluster.mark_ready(pod)

    def start_launcher(self, *program_args):
        command = [self.mpi.launcher, self.mpi.np_flag, "4", *self.program,
                   *program_args]
        pod = self.cluster.start_pod(self.launcher.task, 0,
                                     ["run", "--", *command],
                                     env=self.env(self.launcher))
        self.cluster.mark_ready(pod)
        return pod

    def start(self, *program_args):
        for pod in self.workers:
            self.start_worker(pod)
        return self.start_launcher(*program_args)

    def await_sums(self):
        """Waits for every rank's sum in the launcher's output; fails at
        once, with the logs, when the launcher ended first."""
        def summed():
            if mpi_ranks(stdout(self.launcher)) == MPI_EXPECTED:
                return True
            assert self.launcher.running(), (
                "the launcher exited before every rank's sum:\n"
                + self.cluster.logs_text())
            return False
        wait_for(summed, JOB_DEADLINE, interval=0.05,
                 what="every rank's sum")

    def spawn_callers(self, pod):
        """The addresses whose calls had `pod`'s spawn server run this MPI's
        daemon, from its log ("spawn: N runs CMD for ipv4:ADDR:PORT")."""
        return [m.group(1) for m in re.finditer(
            r"spawn: \d+ runs .*" + re.escape(self.mpi.daemon)
            + r".* for ipv4:([\d.]+):\d+$", stderr(pod), re.MULTILINE)]

    def job_processes(self, pod):
        """The pod's processes other than its agent (and the `unshare`
        that started it): what mpirun left there."""
        agent = pod.agent_pid()
        return [p for p in pod.processes() if p not in (agent, pod.proc.pid)]

    def stop_workers(self):
        """SIGTERM to the worker pods, as the operator deletes them; each
        exits 143 and leaves nothing."""
        self.cluster.stop_all_within(self.workers, grace=5, slack=5)
        assert self.cluster.leftover_processes() == {}

    def await_workers_end(self, code, workers=None):
        """The launcher told the workers the job ended: each worker pod
        exits by itself with the job's `code`, and leaves nothing."""
        for pod in workers or self.workers:
            r = pod.wait(timeout=STOP_GRACE)
            assert r.exit_code == code, (pod.name, r.exit_code,
                                         r.stderr[-3000:])
            assert "the launcher" in r.stderr and "ended the job" in r.stderr
        assert self.cluster.leftover_processes() == {}


def stdout(pod):
    return (pod.artifacts / "stdout").read_text(errors="replace")


def stderr(pod):
    return (pod.artifacts / "stderr").read_text(errors="replace")


# The Volcano shape also shows the launcher's reachability settings: in a
# pod the bare pod name resolves only in the pod itself (Kubernetes
# searches <ns>.svc.cluster.local, not the job's subdomain), so Open MPI
# must keep the hostfile's names whole and Hydra's proxies must call back
# by address (docs/mpi.md, "How the workers reach the launcher back").
@pytest.mark.parametrize("shape, mpi", [
    pytest.param("mpijob", OPEN_MPI, id="mpijob-openmpi"),
    pytest.param("mpijob", MPICH, id="mpijob-mpich"),
    pytest.param("volcano", OPEN_MPI, id="volcano-openmpi"),
    pytest.param("volcano", MPICH, id="volcano-mpich"),
])
def test_an_allreduce_over_4_ranks_in_3_pods(make_cluster, artifacts,
                                             programs, shape, mpi):
    job = Job(make_cluster, artifacts, shape, mpi, programs[mpi], chain=True)
    launcher = job.start()
    r = launcher.wait(timeout=JOB_DEADLINE)
    assert r.exit_code == 0, job.cluster.logs_text()
    assert mpi_ranks(r.stdout) == MPI_EXPECTED, r.stdout + r.stderr
    assert "fake" not in r.stdout + r.stderr
    # The ranks ran on the workers, their daemons started by the agents:
    # the first by mpirun, the second by mpirun or, in Open MPI's tree
    # spawn, by the first worker's daemon.
    first, second = job.workers
    assert job.spawn_callers(first) == [job.launcher.ip], stderr(first)
    assert job.spawn_callers(second) == [
        first.ip if job.chain else job.launcher.ip], stderr(second)
    job.await_workers_end(0)


def test_a_worker_pod_started_10s_late(make_cluster, artifacts, programs):
    """The race a launcher loses against sshd: the launcher waits, naming
    the missing worker, and the job runs once it serves."""
    job = Job(make_cluster, artifacts, "mpijob", OPEN_MPI,
              programs[OPEN_MPI])
    early, late = job.workers
    job.start_worker(early)
    launcher = job.start_launcher()

    def waiting_for_late():
        # The last progress line of the wait, once 10 s have passed.
        waits = re.findall(r"waiting \S+ for the spawn servers of (.*)",
                           stderr(launcher))
        return (time.monotonic() - launcher.started >= 10 and waits
                and waits[-1].split(", ") == [f"{late.name}.mj.default.svc"])
    wait_for(waiting_for_late, 30, interval=0.1,
             what=f"the launcher waiting 10 s for {late.name} alone")
    assert launcher.running(), stderr(launcher)
    job.start_worker(late)
    r = launcher.wait(timeout=JOB_DEADLINE)
    assert r.exit_code == 0, job.cluster.logs_text()
    assert mpi_ranks(r.stdout) == MPI_EXPECTED, r.stdout + r.stderr
    job.await_workers_end(0)


@pytest.mark.parametrize("mpi, chain", [
    pytest.param(OPEN_MPI, False, id="openmpi-flat"),
    pytest.param(OPEN_MPI, True, id="openmpi-tree"),
    pytest.param(MPICH, False, id="mpich"),
])
def test_a_worker_pod_killed_mid_job(make_cluster, artifacts, programs,
                                    timings, mpi, chain):
    """Node loss under a running job: every process of one worker pod
    SIGKILLed at once while the ranks wait in a sleep and a Barrier. The
    launcher ends promptly with a retryable code naming the lost host,
    also when the lost worker's daemon was started by the other worker's
    (tree spawn: no call of the launcher's own broke)."""
    job = Job(make_cluster, artifacts, "mpijob", mpi, programs[mpi],
              chain=chain)
    launcher = job.start("300")
    job.await_sums()
    survivor, lost = job.workers
    before = len(stderr(launcher))
    killed = time.monotonic()
    job.cluster.kill_pod(lost)
    r = launcher.wait(timeout=30)
    took = time.monotonic() - killed
    timings(f"mpi worker pod killed ({mpi.launcher}"
            f"{', tree spawn' if chain else ''})", "agent",
            "kill to launcher exit", took)
    assert took < 5, f"the launcher took {took:.1f}s to end after the kill"
    assert 128 <= r.exit_code <= 255, (r.exit_code, r.stderr[-3000:])
    # The survivor was told the job ended: its share of the job goes with
    # it, and its pod exits with the job's code.
    job.await_workers_end(r.exit_code, [survivor])
    # The launcher's own exit for a lost worker (issue 41): 138, the code
    # every Kubeflow version retries, and a line of its own (not mpirun's,
    # not rsh's) naming the host.
    assert r.exit_code == 138, (r.exit_code, r.stderr[-3000:])
    agent_lines = [line for line in r.stderr[before:].splitlines()
                   if re.match(r"\[\S+ distjob-agent \d+ ", line)
                   and lost.name in line]
    assert agent_lines, f"no agent line names {lost.name}:\n{r.stderr}"


@pytest.mark.parametrize("mpi", [OPEN_MPI, MPICH], ids=["openmpi", "mpich"])
def test_sigterm_to_the_launcher_mid_job(make_cluster, artifacts, programs,
                                        timings, mpi):
    """A stop of the launcher pod (deletion, eviction): within the grace
    period no MPI process of the job is left on any worker pod, and the
    workers serve on until their own stop signal: a stopped launcher is
    not the job's end (docs/mpi.md, "When the job ends"), the operator
    may start another."""
    job = Job(make_cluster, artifacts, "mpijob", mpi, programs[mpi])
    launcher = job.start("300")
    job.await_sums()
    assert all(job.job_processes(w) for w in job.workers)
    sent = time.monotonic()
    job.cluster.kill_agent(launcher, signal.SIGTERM)
    wait_for(lambda: not any(job.job_processes(w) for w in job.workers),
             STOP_GRACE, interval=0.1,
             what="no MPI process of the job left on the worker pods")
    timings(f"mpi launcher SIGTERM ({mpi.launcher})", "agent",
            "to no MPI process on workers", time.monotonic() - sent)
    r = launcher.wait(timeout=STOP_GRACE)
    assert time.monotonic() - sent < STOP_GRACE, r.stderr[-3000:]
    assert r.exit_code == 128 + signal.SIGTERM, (r.exit_code,
                                                 r.stderr[-3000:])
    for pod in job.workers:
        assert pod.running(), stderr(pod)
        health = pod.exec([job.cluster.agent, "health", "--port",
                           str(SPAWN_PORT), "--service",
                           SPAWN_HEALTH_SERVICE])
        assert health.returncode == 0 and "SERVING" in health.stdout, (
            pod.name, health.stdout, health.stderr)
    job.stop_workers()
