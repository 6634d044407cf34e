"""MPI jobs without SSH, on loopback: two worker agents serve spawns on
127.0.0.2 and 127.0.0.3 (the same port; Open MPI and Hydra take these
addresses for remote hosts and call their remote shell for them), and the
launcher role runs Debian's real mpirun (Open MPI 4) or mpiexec.hydra
(MPICH 4) through `distjob-agent rsh`. No sshd runs: a fake `ssh` and `rsh`
first on the launcher's PATH fail the job if anything calls them.

Run as root here: Open MPI refuses root unless OMPI_ALLOW_RUN_AS_ROOT and
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM are set (as the test does); the agent itself
needs no root.
"""

import dataclasses
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness import (CLEAN_JOB_ENV, MPI_ALLREDUCE_PY, MPI_EXPECTED, PYTHON,
                     build_mpich_allreduce, descendants, free_port_on,
                     kill_tree, mpi_ranks, no_ssh_dir, wait_for)

WORKERS = ("127.0.0.2", "127.0.0.3")
TOKEN = "mpi-tok-5fN2qW8xR1"

@dataclasses.dataclass(frozen=True)
class Mpi:
    """One MPI implementation as a launcher pod runs it."""
    launcher: str  # its mpirun
    daemon: str  # what it has each worker's spawn server run
    hostfile_flag: str
    hostfile_line: str  # one worker's line, with its two slots
    np_flag: str
    hosts_flag: str  # the hosts on the command line, comma-separated

    def hostfile(self, tmp_path):
        path = tmp_path / f"hostfile.{self.launcher}"
        path.write_text("".join(self.hostfile_line.format(h)
                                for h in WORKERS))
        return path

    def command(self, tmp_path, program, *args):
        """mpirun running `program` (an argv) with `args` in 4 ranks, 2 on
        each worker."""
        return [self.launcher, self.hostfile_flag,
                str(self.hostfile(tmp_path)), self.np_flag, "4", *program,
                *args]

    def hosts_command(self, *argv):
        """mpirun naming the workers on its command line."""
        return [self.launcher, self.hosts_flag, ",".join(WORKERS), *argv]


OPEN_MPI = Mpi(launcher="mpirun.openmpi", daemon="orted",
               hostfile_flag="--hostfile", hostfile_line="{} slots=2\n",
               np_flag="-np", hosts_flag="-H")
MPICH = Mpi(launcher="mpiexec.hydra", daemon="hydra_pmi_proxy",
            hostfile_flag="-f", hostfile_line="{}:2\n", np_flag="-n",
            hosts_flag="-hosts")


@pytest.fixture(params=[OPEN_MPI, MPICH], ids=["openmpi", "mpich"])
def mpi(request):
    if shutil.which(request.param.launcher) is None:
        pytest.fail(f"{request.param.launcher} is missing: run "
                    ".ci/install-deps")
    return request.param


@pytest.fixture
def program(mpi, tmp_path):
    """The allreduce as an argv for `mpi`: Open MPI's in Python, MPICH's
    in C."""
    if mpi is OPEN_MPI:
        path = tmp_path / "allreduce.py"
        path.write_text(MPI_ALLREDUCE_PY)
        return [PYTHON, str(path)]
    return [str(build_mpich_allreduce(tmp_path))]


def _launcher_env(tmp_path):
    """The job's environment: the token, the port, root allowed for Open
    MPI, and a PATH whose ssh and rsh fail the job."""
    fake = no_ssh_dir(tmp_path)
    return {
        **CLEAN_JOB_ENV,
        **_own_tmpdir(tmp_path, "launcher"),
        "DISTJOB_RDZV_TOKEN": TOKEN,
        "DISTJOB_SPAWN_PORT": str(free_port_on(WORKERS)),
        "PATH": f"{fake}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        # Both "nodes" are this machine: Open MPI's shared-memory transport
        # between two daemons' ranks on one host crashes (vader); TCP works.
        "OMPI_MCA_btl": "tcp,self",
    }


def _own_tmpdir(tmp_path, node):
    """`env` entries giving `node` a /tmp of its own, as each pod has.
    Open MPI keys a node's session directory (/tmp/ompi.HOST.UID/jf.JOB:
    its daemon's hwloc topology file, the job's per-rank directories) by
    host name, so the two daemons of one job on this one host shared one
    and wrote the same files; PMIx logged a dstore error in some of those
    runs. Real pods never share it, and a test that does tests Open MPI's
    races rather than the agent."""
    tmp = tmp_path / f"tmp-{node}"
    tmp.mkdir()
    return {"TMPDIR": str(tmp)}


def _start_workers(start_agent, env, tmp_path):
    """The two worker agents serving spawns: their Popens."""
    return [
        start_agent(["run", "--framework", "mpi", "--role", "worker",
                     "--spawn-host", host],
                    env={**env, **_own_tmpdir(tmp_path, host)},
                    log=tmp_path / f"worker-{host}.log")
        for host in WORKERS]


@pytest.fixture
def mpi_job(tmp_path, start_agent):
    """Starts the two worker agents; returns (env, worker procs), `env`
    the launcher's (_launcher_env)."""
    env = _launcher_env(tmp_path)
    return env, _start_workers(start_agent, env, tmp_path)


def _spawned(tmp_path, what):
    """Whether every worker's log shows a spawn of `what`."""
    return all(what in (tmp_path / f"worker-{h}.log").read_text()
               for h in WORKERS)


def test_an_allreduce_runs_through_the_spawn_servers(run_agent, tmp_path,
                                                     mpi, program, mpi_job):
    env, workers = mpi_job
    r = run_agent(["run", "--framework", "mpi", "--"]
                  + mpi.command(tmp_path, program), env=env, timeout=120,
                  stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mpi_ranks(r.stdout) == MPI_EXPECTED, r.stdout + r.stderr
    assert "fake" not in r.stderr
    assert _spawned(tmp_path, mpi.daemon), \
        f"{mpi.daemon} was not started by the workers"
    # The launcher told the workers the job ended: their pods complete.
    for w in workers:
        assert w.wait(timeout=10) == 0
    assert "told 2 of 2 workers that the job ended" in r.stderr, r.stderr


def test_a_refused_token_is_no_lost_worker(run_agent, tmp_path, mpi,
                                           program, mpi_job):
    """Workers that refuse the launcher's token are the job's
    configuration, not a loss: exit 2 at once naming the worker, no
    retryable 138 that would rerun it, and no wait on a Hydra that waits
    for ever for proxies that never started."""
    env, workers = mpi_job
    started = time.monotonic()
    r = run_agent(["run", "--framework", "mpi", "--"]
                  + mpi.command(tmp_path, program),
                  env={**env, "DISTJOB_RDZV_TOKEN": "not-the-jobs-token"},
                  timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, r.stdout + r.stderr
    assert time.monotonic() - started < 15
    assert "a worker refused mpirun's remote launch: 127.0.0." in r.stderr, \
        r.stderr
    assert "not-the-jobs-token" not in r.stderr + r.stdout
    assert "lost mid-job" not in r.stderr, r.stderr
    assert all(w.poll() is None for w in workers), "a worker ended"


def test_workers_end_when_mpirun_cannot_start(run_agent, tmp_path, mpi_job):
    """mpirun missing: the job ended before it began, and the workers of a
    plain Job must not serve on forever."""
    env, workers = mpi_job
    r = run_agent(["run", "--framework", "mpi", "--", "no-such-mpirun",
                   "-H", ",".join(WORKERS), "true"], env=env, timeout=60)
    assert r.returncode == 127, r.stderr
    for w in workers:
        assert w.wait(timeout=10) == 127


def test_rsh_gets_the_launchers_token_and_port_flags(run_agent, tmp_path,
                                                     mpi, program, mpi_job):
    """rsh reads only its environment: a token file and a spawn port given
    to the launcher as flags reach it through mpirun's environment."""
    env, _ = mpi_job
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = env["DISTJOB_SPAWN_PORT"]
    flagged = {**env, "DISTJOB_RDZV_TOKEN": None, "DISTJOB_SPAWN_PORT": None}
    r = run_agent(["run", "--framework", "mpi", "--rdzv-token-file",
                   str(token_file), "--spawn-port", port, "--"]
                  + mpi.command(tmp_path, program), env=flagged, timeout=120,
                  stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mpi_ranks(r.stdout) == MPI_EXPECTED, r.stdout + r.stderr


def _await_sums(launcher, log, workers):
    """Waits for every rank's sum in `log`, the launcher's; fails at once,
    with the log, when the launcher ended first (a failed mpirun is not a
    slow one), and past the deadline with the job's processes."""
    def summed():
        if mpi_ranks(log.read_text()) == MPI_EXPECTED:
            return True
        code = launcher.poll()
        assert code is None, (f"the launcher exited with {code} before "
                              f"every rank's sum:\n{log.read_text()}")
        return False
    try:
        wait_for(summed, 60, what="every rank's sum")
    except TimeoutError as e:
        # A hung job: where each of its processes waits (the agents' logs
        # follow, from the `background` fixture).
        pids = [launcher.pid] + [w.pid for w in workers]
        raise AssertionError(f"{e}; the launcher's and the workers' "
                             f"processes:\n{_tree(pids)}\n{log.read_text()}")


def _tree(pids):
    """`pids` and their descendants, one per line: state, kernel wait
    channel and command line."""
    lines = []
    for p in [d for pid in pids for d in [pid] + descendants(pid)]:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{p}/wchan") as f:
                wchan = f.read()
            with open(f"/proc/{p}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        lines.append(f"  {p} {state} {wchan or '-'} {cmd[:200]}")
    return "\n".join(lines)


def test_a_killed_worker_ends_the_job_retryable_naming_it_within_5s(
        tmp_path, mpi, program, mpi_job, start_agent):
    """A worker pod's whole tree SIGKILLed mid-job (node loss): mpirun
    itself exits with a code that says nothing of it (a rank's 1, or its
    own), so the launcher must tell the loss apart: retryable 138, the
    host named in its log and termination message."""
    env, workers = mpi_job
    out = tmp_path / "launcher.out"
    message = tmp_path / "termination-log"
    launcher = start_agent(
        ["run", "--framework", "mpi", "--termination-log", str(message),
         "--"] + mpi.command(tmp_path, program, "300"),
        env=env, log=out, stdin=subprocess.DEVNULL)
    _await_sums(launcher, out, workers)
    killed = time.monotonic()
    kill_tree(workers[1])
    code = launcher.wait(timeout=30)
    took = time.monotonic() - killed
    log = out.read_text()
    assert code == 138, log
    assert took < 5, f"the launcher took {took:.1f}s to end after the kill"
    assert f"MPI worker lost mid-job: {WORKERS[1]} (" in log, log
    assert WORKERS[0] + " (" not in log, "the surviving worker named lost"
    assert message.read_text().startswith(
        "distjob-agent: retryable exit_code=138"), message.read_text()
    assert WORKERS[1] in message.read_text()
    # The surviving worker was told, and ends with the job's code.
    assert workers[0].wait(timeout=10) == 138
    # The surviving worker's share of the job went with it.
    wait_for(lambda: not _job_processes(program[-1]), 10,
             what="no rank of the job left")


def test_a_call_to_a_host_not_waited_for_is_a_configuration_error(
        run_agent, mpi_job):
    """A host the launcher did not wait for was never part of the job (not
    in its hostfile or host list: mistyped, or named another way). A failed
    call to it must neither hang the job (Hydra waits for that proxy for
    ever) nor end it retryable (the same command calls it again). The
    stand-in mpirun records such a call as rsh does, then waits as Hydra
    would: the launcher ends it after its 5 s grace and exits 2 naming the
    host, and so do the workers."""
    env, workers = mpi_job
    record = ('printf "127.0.0.9\\tL\\tno spawn server answers\\n" '
              '>> "$DISTJOB_MPI_LOST_HOSTS_FILE" && exec sleep 60')
    began = time.monotonic()
    r = run_agent(["run", "--framework", "mpi", "--", "sh", "-c", record,
                   "-H", ",".join(WORKERS)], env=env, timeout=40)
    took = time.monotonic() - began
    assert r.returncode == 2, r.stderr
    assert "did not wait for" in r.stderr and "127.0.0.9" in r.stderr, \
        r.stderr
    assert took < 20, f"the launcher took {took:.1f}s"
    assert all(w.wait(timeout=10) == 2 for w in workers)


def test_a_ranks_own_error_stays_permanent(run_agent, tmp_path, mpi,
                                           mpi_job):
    """The other side of the loss: every worker alive and a rank that
    fails by itself keeps mpirun's own (permanent) code."""
    env, workers = mpi_job
    r = run_agent(["run", "--framework", "mpi", "--"]
                  + mpi.command(tmp_path, ["sh", "-c", "exit 3"]),
                  env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert 0 < r.returncode < 128, r.stdout + r.stderr
    assert "lost mid-job" not in r.stderr, r.stderr
    assert "distjob-agent: permanent exit_code=" in r.stderr, r.stderr
    for w in workers:
        assert w.wait(timeout=10) == r.returncode


def _job_processes(program):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if str(program).encode() in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def test_the_launcher_waits_for_a_late_worker(tmp_path, mpi, program,
                                              start_agent):
    env = _launcher_env(tmp_path)
    log = tmp_path / "launcher.log"
    launcher = start_agent(
        ["run", "--framework", "mpi", "--"] + mpi.command(tmp_path, program),
        env=env, log=log, stdin=subprocess.DEVNULL)
    wait_for(lambda: "waiting for the spawn servers" in log.read_text(), 30,
             what="the launcher's wait")
    # The race a launcher loses against sshd.
    _start_workers(start_agent, env, tmp_path)
    assert launcher.wait(timeout=120) == 0, log.read_text()
    assert mpi_ranks(log.read_text()) == MPI_EXPECTED


def test_a_stop_signal_ends_the_launchers_wait_within_1s(tmp_path, mpi,
                                                        start_agent):
    env = {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
           "DISTJOB_SPAWN_PORT": str(free_port_on(WORKERS))}
    log = tmp_path / "launcher.log"
    launcher = start_agent(
        ["run", "--framework", "mpi", "--"] + mpi.hosts_command("true"),
        env=env, log=log)
    wait_for(lambda: "waiting for the spawn servers" in log.read_text(), 30,
             what="the launcher's wait")
    stopped = time.monotonic()
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=10) == 128 + signal.SIGTERM
    assert time.monotonic() - stopped < 1.0


def test_the_wait_is_bounded_and_names_each_missing_host(run_agent, mpi):
    r = run_agent(
        ["run", "--framework", "mpi", "--spawn-wait", "1s", "--"]
        + mpi.hosts_command("true"),
        env={**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
             "DISTJOB_SPAWN_PORT": str(free_port_on(WORKERS))})
    assert r.returncode == 138, r.stderr
    assert "127.0.0.2, 127.0.0.3" in r.stderr


def test_a_volcano_job_runs_with_no_flags_and_a_hostfile_it_wrote(
        run_agent, tmp_path, mpi, program, start_agent):
    """Volcano's mpi plugin's layout: tasks mpimaster and mpiworker, their
    host files, pods named <job>-<task>-<index>; no MPI flag, and mpirun
    given no hostfile: the launcher writes one from the worker hosts, 2
    slots each (--nproc-per-node), in this MPI's format."""
    volcano = tmp_path / "volcano"
    volcano.mkdir()
    (volcano / "mpimaster.host").write_text("127.0.0.1")
    (volcano / "mpiworker.host").write_text("\n".join(WORKERS))
    env = _launcher_env(tmp_path)
    for i, host in enumerate(WORKERS):
        start_agent(["run", "--volcano-dir", str(volcano), "--hostname",
                     f"vj-mpiworker-{i}", "--spawn-host", host],
                    env={**env, **_own_tmpdir(tmp_path, host)},
                    log=tmp_path / f"worker-{host}.log")
    r = run_agent(["run", "--volcano-dir", str(volcano), "--hostname",
                   "vj-mpimaster-0", "--nproc-per-node", "2", "--",
                   mpi.launcher, mpi.np_flag, "4", *program],
                  env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert mpi_ranks(r.stdout) == MPI_EXPECTED, r.stdout + r.stderr
    assert "Volcano task mpimaster" in r.stderr, r.stderr
    assert _spawned(tmp_path, mpi.daemon), \
        f"{mpi.daemon} was not started by the workers"
