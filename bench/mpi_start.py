"""`bench/run.sh --only mpi_start`: an MPI job's start to its first rank
running, 3 pods (issue 41), through the agent's spawn servers and through
Debian's sshd, side by side in the same run.

The pods are loopback addresses, as in tests/integration/test_mpi_spawn.py:
the launcher on 127.0.0.1, the workers on 127.0.0.2 and 127.0.0.3, each
with a /tmp of its own (Open MPI keys its session directory by host name,
which is one name here). The job is the same on both sides: Open MPI 4's
`mpirun.openmpi --hostfile HOSTFILE -np 4 stamp FILE`, two ranks a
worker. The agent: a worker agent serving spawns on each worker address,
the launcher `distjob-agent run --framework mpi -- mpirun ...`, which
waits for both spawn servers, then has mpirun reach them through
`distjob-agent rsh`. The anchor: an sshd on each worker address, the
launcher that same mpirun with `--mca plm_rsh_agent "ssh ..."`, as an
MPI Operator launcher pod runs it.
"""

import contextlib
import os
import pathlib
import shutil
import statistics
import subprocess
import tempfile
import time

import harness  # run.py puts tests/ on the path

WORKERS = ("127.0.0.2", "127.0.0.3")
SLOTS = 2  # ranks a worker: 4 in all
MPIRUN = "mpirun.openmpi"
SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
SIDES = ("distjob-agent", "sshd")
# The floor, for the note: the same mpirun with every rank on the launcher,
# no remote launch at all.
LOCAL = "mpirun alone"
# The servers' start and a job's end are bounded; a job is a second or two.
SERVE_TIMEOUT_S = 30
JOB_TIMEOUT_S = 120


def _env():
    """This process's environment without the job variables (a pod's own
    environment must not reach the agent), plus the job's token."""
    env = {k: v for k, v in os.environ.items()
           if k not in harness.CLEAN_JOB_ENV}
    env["DISTJOB_RDZV_TOKEN"] = "mpi-start-bench-token-7Qx2"
    return env


def _serving(procs, port, logs):
    """Waits until every worker address accepts connections on `port`;
    fails at once, with the server's log, if a server exits first."""
    def up():
        for proc, log in zip(procs, logs):
            if proc.poll() is not None:
                raise RuntimeError(f"a server exited with {proc.returncode}:"
                                   f"\n{pathlib.Path(log).read_text()}")
        return all(harness.accepting(port, h) for h in WORKERS)
    harness.wait_for(up, SERVE_TIMEOUT_S, interval=0.005,
                     what=f"servers on port {port}")


def _pod_dir(tmp, name):
    path = tmp / name
    path.mkdir(mode=0o700)
    return path


class SshdPods:
    """Keys made now with ssh-keygen, and an sshd on each worker address,
    run as this user with a config, host key and authorized_keys of its
    own. sshd refuses an authorized_keys under a group- or world-writable
    directory (StrictModes, on by default): with /tmp as a parent every
    login failed, so the keys live under this user's home, in a 0700
    directory removed at close."""

    def __init__(self, background, tmp):
        self.background, self.tmp = background, tmp
        self.keys = pathlib.Path(tempfile.mkdtemp(
            prefix=".distjob-bench-ssh-", dir=pathlib.Path.home()))
        self.user_key = self.keys / "id_ed25519"
        self._keygen(self.user_key)
        # As root, sshd wants its privilege-separation directory, which
        # only the service's start would have made.
        self.made_run_dir = False
        if os.geteuid() == 0 and not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", mode=0o755)
            self.made_run_dir = True

    def _keygen(self, path):
        subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f",
                        str(path)], check=True, stdin=subprocess.DEVNULL)

    def config(self, host, port, pod_tmp):
        """One worker pod's sshd_config. Only what this setup needs is set,
        the rest is OpenSSH's compiled default (no PAM, unlike Debian's
        packaged config: less work per login for the anchor). HOME and
        TMPDIR for the session: the login shell is this user's, and its
        rc files here (pyenv's init in root's ~/.bashrc took 0.3 s a login)
        are this machine's, not the image's; a pod's image would have
        Debian's, which do nothing when not interactive."""
        pod = self.keys / host
        pod.mkdir(mode=0o700)
        self._keygen(pod / "host_key")
        shutil.copy(f"{self.user_key}.pub", pod / "authorized_keys")
        (pod / "authorized_keys").chmod(0o600)
        path = pod / "sshd_config"
        path.write_text(
            f"Port {port}\n"
            f"ListenAddress {host}\n"
            f"HostKey {pod / 'host_key'}\n"
            f"AuthorizedKeysFile {pod / 'authorized_keys'}\n"
            "PidFile none\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            f"SetEnv HOME={pod} TMPDIR={pod_tmp}\n")
        return path

    def start(self, port):
        procs, logs = [], []
        for host in WORKERS:
            pod_tmp = _pod_dir(self.tmp, f"tmp-sshd-{host}")
            log = self.tmp / f"sshd-{host}.log"
            procs.append(self.background.start(
                [SSHD, "-D", "-e", "-f", str(self.config(host, port,
                                                         pod_tmp))],
                log=log, stdin=subprocess.DEVNULL))
            logs.append(log)
        _serving(procs, port, logs)
        return procs

    def rsh_agent(self, port):
        """mpirun's remote shell: this side's key, no host-key prompts
        (keys made a moment ago), never a password prompt."""
        return (f"ssh -p {port} -i {self.user_key} "
                "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
                "-o BatchMode=yes -o LogLevel=ERROR")

    def close(self):
        shutil.rmtree(self.keys, ignore_errors=True)
        if self.made_run_dir:
            with contextlib.suppress(OSError):
                os.rmdir("/run/sshd")


def _agent_workers(background, agent, tmp, port):
    procs, logs = [], []
    for host in WORKERS:
        env = {**_env(), "DISTJOB_SPAWN_PORT": str(port),
               "TMPDIR": str(_pod_dir(tmp, f"tmp-agent-{host}"))}
        log = tmp / f"agent-{host}.log"
        procs.append(background.start(
            [agent, "run", "--framework", "mpi", "--role", "worker",
             "--spawn-host", host], env=env, log=log,
            stdin=subprocess.DEVNULL))
        logs.append(log)
    _serving(procs, port, logs)
    return procs


def _job(stamp, tmp, stamps, local=False):
    """The same mpirun on both sides: 4 ranks, 2 on each worker (`local`:
    all 4 on this host, the floor)."""
    hostfile = tmp / "hostfile"
    hostfile.write_text("".join(f"{h} slots={SLOTS}\n" for h in WORKERS))
    hosts = ["--oversubscribe"] if local else ["--hostfile", str(hostfile)]
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    return [MPIRUN, *root, *hosts, "-np", str(SLOTS * len(WORKERS)), stamp,
            str(stamps)]


def _time_job(argv, env, stamps, log):
    """Starts the launcher, waits for it to end; (first rank's start,
    last rank's start, the launcher's end) in seconds from its start."""
    with open(log, "w") as out:
        start = time.monotonic_ns()
        proc = subprocess.Popen(argv, env=env, stdout=out,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        try:
            code = proc.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            harness.kill_tree(proc)
            raise RuntimeError(f"no end within {JOB_TIMEOUT_S} s: {argv}\n"
                               f"{pathlib.Path(log).read_text()}")
        end = time.monotonic_ns()
    starts = [int(line.split()[2]) for line in
              pathlib.Path(stamps).read_text().splitlines()
              if line.split()[1] == "start"] if stamps.exists() else []
    if code != 0 or len(starts) != SLOTS * len(WORKERS):
        raise RuntimeError(f"{argv[0]} exited {code} with {len(starts)} "
                           f"ranks started:\n{pathlib.Path(log).read_text()}")
    return ((min(starts) - start) / 1e9, (max(starts) - start) / 1e9,
            (end - start) / 1e9)


def one_job(side, agent, stamp):
    """One repetition of `side` with servers (and, for sshd, keys) of its
    own: start them, wait until both serve (the workers are up before the
    job, as pods whose readiness the launcher waited on), time the job,
    stop them."""
    with tempfile.TemporaryDirectory() as tmp_name, \
            contextlib.ExitStack() as stack:
        tmp = pathlib.Path(tmp_name)
        background = harness.Background()
        pods = SshdPods(background, tmp) if side == "sshd" else None
        if pods:
            stack.callback(pods.close)  # after the servers are gone
        stack.enter_context(background)
        port = harness.free_port_on(WORKERS)
        stamps = tmp / "stamps"
        job = _job(stamp, tmp, stamps, local=side == LOCAL)
        env = {**_env(), "TMPDIR": str(_pod_dir(tmp, "tmp-launcher"))}
        if side == LOCAL:
            argv = job
        elif pods:
            pods.start(port)
            argv = job[:1] + ["--mca", "plm_rsh_agent",
                              pods.rsh_agent(port)] + job[1:]
        else:
            _agent_workers(background, agent, tmp, port)
            env["DISTJOB_SPAWN_PORT"] = str(port)
            argv = [agent, "run", "--framework", "mpi", "--"] + job
        return _time_job(argv, env, stamps, tmp / "launcher.log")


def _sshd_version():
    # sshd has no version flag: its usage line says it, on stderr.
    out = subprocess.run([SSHD, "-V"], capture_output=True, text=True)
    return (out.stderr.strip().splitlines() or ["sshd"])[0]


def _note(reps, first, last, end, load_before, version):
    def ms(xs):
        return f"{statistics.median(xs) * 1000:.0f} ms"
    agent, sshd = SIDES
    return (
        "Open MPI 4 (`mpirun.openmpi --hostfile H -np 4 bench/stamp FILE`, "
        "2 ranks on each of 2 workers), 3 pods on loopback (launcher "
        "127.0.0.1, workers 127.0.0.2-3, a /tmp each); from the launcher's "
        "start to the first rank's `start` stamp. *distjob-agent*: a "
        "worker agent serving spawns on each worker address, the launcher "
        "`distjob-agent run --framework mpi -- mpirun ...` (it waits for "
        "both spawn servers, then mpirun reaches them through "
        "`distjob-agent rsh`). *sshd* (the torchrun column): Debian's "
        "OpenSSH sshd on each worker address, run as this user with a "
        "host key, authorized_keys and config of its own (keys made by "
        "ssh-keygen for the repetition, compiled-in defaults otherwise: "
        "no PAM; the session's HOME is the pod's directory, so that this "
        "machine's rc files do not run at login), the launcher the same "
        "mpirun with `--mca plm_rsh_agent \"ssh -p PORT -i KEY ...\"`, as "
        "an MPI Operator launcher runs it. Both sides' servers are started "
        "afresh for each repetition and serve before the clock starts; "
        f"the sides alternate which goes first. {reps} repetitions a side. "
        f"Medians, agent / sshd: all 4 ranks running {ms(last[agent])} / "
        f"{ms(last[sshd])}, the launcher's exit {ms(end[agent])} / "
        f"{ms(end[sshd])}. The floor, the same mpirun with its 4 ranks on "
        "the launcher (`--oversubscribe`, no remote launch): first rank "
        f"{ms(first[LOCAL])}, exit {ms(end[LOCAL])}. Load average (1 min) "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after. Agent: "
        f"{' '.join(version[:2])}; {_sshd_version()}.")


def bench_mpi_start(reps, agent, stamp):
    """The row for docs/bench/results.md: from the launcher's start to the
    first rank's `start` stamp; the sshd side in the torchrun column
    (`anchor`). The last rank's start, the launcher's end and the floor
    go to the note."""
    for tool in (MPIRUN, SSHD, SSH_KEYGEN, "ssh"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is missing: run .ci/install-deps")
    version = subprocess.run([agent, "--version"], capture_output=True,
                             text=True, check=True).stdout.splitlines()
    load_before = os.getloadavg()[0]
    sides = SIDES + (LOCAL,)
    first = {side: [] for side in sides}
    last = {side: [] for side in sides}
    end = {side: [] for side in sides}
    for rep in range(reps):
        # Each side goes first every other repetition.
        for side in sides if rep % 2 == 0 else sides[::-1]:
            f, l, e = one_job(side, agent, stamp)
            first[side].append(f)
            last[side].append(l)
            end[side].append(e)
    return [{"name": "MPI job start to first rank running, 3 pods",
             "unit": "s", "anchor": "sshd",
             "samples": {"distjob-agent": first["distjob-agent"],
                         "torchrun": first["sshd"]},
             "note": _note(reps, first, last, end, load_before, version)}]
