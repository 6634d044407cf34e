"""`distjob-agent rsh` and the MPI worker role, one agent at a time: ssh's
command line, exit codes and streams as MPI launchers expect them, signal
forwarding, the end of a call ending the remote command, and a spawn
server that will not start without the job's token."""

import json
import os
import signal
import subprocess

import pytest

from harness import CLEAN_JOB_ENV, agent_env, free_port, pid_alive, wait_for

TOKEN = "rsh-tok-K8d2Lq9Zp"


@pytest.fixture
def worker(tmp_path, start_agent):
    """A worker agent serving spawns on 127.0.0.1; returns rsh's env."""
    port = free_port()
    health = free_port()
    env = {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
           "DISTJOB_SPAWN_PORT": str(port)}
    log = tmp_path / "worker.log"
    message = tmp_path / "worker.termination-log"
    proc = start_agent(["run", "--framework", "mpi", "--role", "worker",
                        "--spawn-host", "127.0.0.1", "--health-port",
                        str(health), "--termination-log", str(message)],
                       env=env, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    return {"env": env, "log": log, "health": health, "port": port,
            "proc": proc, "message": message}


def _end_job(worker, token, code, reason):
    """The launcher's EndJob, sent by hand (a raw gRPC client): the
    request's fields encoded as protobuf does. The status code."""
    import grpc
    body = reason.encode()
    request = (b"\x08" + bytes([code]) + b"\x12" + bytes([len(body)])
               + body)
    with grpc.insecure_channel(f"127.0.0.1:{worker['port']}") as channel:
        call = channel.unary_unary("/distjob.spawn.Spawner/EndJob")
        try:
            call(request, timeout=10,
                 metadata=[("authorization", f"Bearer {token}")])
        except grpc.RpcError as e:
            return e.code()
    return grpc.StatusCode.OK


def test_rsh_streams_and_returns_the_remote_status(run_agent, worker):
    r = run_agent(["rsh", "-x", "-q", "-o", "ConnectTimeout=10", "-p", "22",
                   "-l", "someone", "127.0.0.1", "read", "x;", "echo",
                   "\"out:$x\";", "echo", "err", ">&2;", "exit", "42"],
                  env=worker["env"], input="hello\n")
    assert r.returncode == 42, r.stderr
    assert r.stdout == "out:hello\n"
    assert r.stderr == "err\n"


def test_rsh_exit_for_a_remote_signal_is_128_plus_n(run_agent, worker):
    r = run_agent(["rsh", "127.0.0.1", "kill -TERM $$"], env=worker["env"])
    assert r.returncode == 128 + signal.SIGTERM, r.stderr


def test_rsh_forwards_sigterm_to_the_remote_command(worker, tmp_path, agent):
    proc = subprocess.Popen(
        [agent, "rsh", "127.0.0.1",
         "trap 'echo got-term; exit 7' TERM; echo ready; "
         "while :; do sleep 0.05; done"],
        env=agent_env(tmp_path, worker["env"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 7, err
        assert out == "got-term\n"
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_rsh_ends_the_remote_group(worker, tmp_path, agent):
    pid_file = tmp_path / "remote.pid"
    proc = subprocess.Popen(
        [agent, "rsh", "127.0.0.1",
         f"sleep 300 & echo $! > {pid_file}; echo ready; wait"],
        env=agent_env(tmp_path, worker["env"]),
        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        remote = int(pid_file.read_text())
        assert pid_alive(remote)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not pid_alive(remote), 10,
             what="the remote command's group to end")


def test_rsh_with_a_wrong_token_is_refused_and_runs_nothing(run_agent, worker,
                                                            tmp_path):
    marker = tmp_path / "ran"
    env = {**worker["env"], "DISTJOB_RDZV_TOKEN": "not-the-token"}
    r = run_agent(["rsh", "127.0.0.1", f"touch {marker}"], env=env)
    assert r.returncode == 255
    assert "refused the token" in r.stderr
    assert "not-the-token" not in r.stderr + r.stdout
    assert not marker.exists()
    assert "not-the-token" not in worker["log"].read_text()


def test_the_token_never_enters_a_spawned_commands_environment(run_agent,
                                                              worker, agent):
    """MPI hands its environment to every rank (DESIGN 3.7): a spawned
    command gets the token as a private file's path, enough for the rsh
    that Open MPI's tree spawn runs there, never its value."""
    r = run_agent(["rsh", "127.0.0.1", "env; echo; cat "
                   "\"$DISTJOB_RDZV_TOKEN_FILE\"; echo; "
                   "stat -c %a \"$DISTJOB_RDZV_TOKEN_FILE\""],
                  env=worker["env"])
    assert r.returncode == 0, r.stderr
    env_part, token, mode = r.stdout.rsplit("\n", 3)[:3]
    assert TOKEN not in env_part, env_part
    assert "DISTJOB_RDZV_TOKEN=" not in env_part
    assert token == TOKEN
    assert mode == "600"
    # And rsh run there reaches a spawn server with it, as tree spawn does.
    port = worker["env"]["DISTJOB_SPAWN_PORT"]
    r = run_agent(["rsh", "127.0.0.1", f"DISTJOB_SPAWN_PORT={port} "
                   f"{agent} rsh 127.0.0.1 exit 9"], env=worker["env"])
    assert r.returncode == 9, r.stderr


def test_a_launcher_that_runs_ssh_itself_reaches_the_spawn_servers(
        run_agent, worker, tmp_path):
    """horovodrun checks every host with `ssh -o ... HOST date` before it
    runs mpirun, and DeepSpeed's pdsh runs ssh too: under the launcher,
    `ssh` first on the PATH is the agent's rsh, not a real ssh (the test's
    own fake one comes after it and fails the job if called)."""
    fake = tmp_path / "no-ssh"
    fake.mkdir()
    (fake / "ssh").write_text("#!/bin/sh\necho 'fake ssh called' >&2\n"
                              "exit 255\n")
    (fake / "ssh").chmod(0o755)
    env = {**worker["env"], "PATH": f"{fake}:/usr/bin:/bin"}
    r = run_agent(["run", "--framework", "mpi", "--", "sh", "-c",
                   "ssh -o PasswordAuthentication=no -o "
                   "StrictHostKeyChecking=no -p 22 127.0.0.1 "
                   "'echo via-ssh-$((6*7))' && ssh 127.0.0.1 date"],
                  env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "via-ssh-42", r.stdout
    assert "fake ssh called" not in r.stderr
    assert "spawn: " in worker["log"].read_text()


def test_the_launchers_end_of_the_job_ends_the_worker_with_its_code(
        worker):
    """A worker pod ends when the launcher says the job ended, with the
    job's code, so a pod of a plain Job or JobSet completes."""
    import grpc
    assert _end_job(worker, TOKEN, 3, "mpirun exited with 3") == \
        grpc.StatusCode.OK
    assert worker["proc"].wait(timeout=10) == 3
    log = worker["log"].read_text()
    assert "ended the job with 3: mpirun exited with 3" in log, log
    assert worker["message"].read_text().startswith(
        "distjob-agent: permanent exit_code=3"), worker["message"].read_text()


def test_an_end_of_the_job_without_the_token_is_refused(run_agent, worker):
    import grpc
    assert _end_job(worker, "not-the-token", 0, "forged") == \
        grpc.StatusCode.UNAUTHENTICATED
    # Still serving: a call with the token runs.
    r = run_agent(["rsh", "127.0.0.1", "exit 7"], env=worker["env"])
    assert r.returncode == 7, r.stderr
    assert worker["proc"].poll() is None
    assert "not-the-token" not in worker["log"].read_text()


def test_the_worker_is_ready_only_while_it_serves(run_agent, worker):
    r = run_agent(["health", "--port", str(worker["health"]), "--service",
                   "readiness"])
    assert r.returncode == 0 and r.stdout.strip() == "SERVING", r.stderr


def test_rsh_bad_input_exits_2_naming_it(run_agent):
    r = run_agent(["rsh", "-Z", "host", "ls"])
    assert r.returncode == 2 and "-Z" in r.stderr, r.stderr
    r = run_agent(["rsh", "host"])
    assert r.returncode == 2 and "COMMAND" in r.stderr, r.stderr
    r = run_agent(["rsh", "host", "ls"],
                  env={"DISTJOB_SPAWN_PORT": "http"})
    assert r.returncode == 2 and "DISTJOB_SPAWN_PORT" in r.stderr, r.stderr


def test_rsh_to_no_spawn_server_exits_255_without_the_token(run_agent):
    r = run_agent(["rsh", "127.0.0.1", "true"],
                  env={**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
                       "DISTJOB_SPAWN_PORT": str(free_port())}, timeout=30)
    assert r.returncode == 255, r.stderr
    assert "127.0.0.1:" in r.stderr and TOKEN not in r.stderr


def test_a_worker_without_token_or_mutual_tls_refuses_to_start(run_agent):
    r = run_agent(["run", "--framework", "mpi", "--role", "worker"],
                  env={**CLEAN_JOB_ENV})
    assert r.returncode == 2
    assert "--rdzv-token-file" in r.stderr and "--rdzv-tls-ca" in r.stderr


def test_a_hostfile_that_cannot_be_read_exits_2_naming_it(run_agent,
                                                          tmp_path):
    missing = tmp_path / "no-hostfile"
    r = run_agent(["run", "--framework", "mpi", "--", "mpirun.openmpi",
                   "--hostfile", str(missing), "true"],
                  env={**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN})
    assert r.returncode == 2, r.stderr
    assert "--hostfile" in r.stderr and str(missing) in r.stderr, r.stderr


def test_the_mpi_operators_worker_role_needs_no_flag(run_agent, start_agent,
                                                     tmp_path):
    # Kubeflow's MPI Operator v2 sets K_MPI_JOB_ROLE on its pods.
    env = {**CLEAN_JOB_ENV, "K_MPI_JOB_ROLE": "worker",
           "DISTJOB_SPAWN_PORT": str(free_port())}
    r = run_agent(["run", "--spawn-host", "127.0.0.1"], env=env)
    assert r.returncode == 2 and "--rdzv-token-file" in r.stderr, r.stderr
    log = tmp_path / "worker.log"
    start_agent(["run", "--spawn-host", "127.0.0.1"],
                env={**env, "DISTJOB_RDZV_TOKEN": TOKEN}, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    r = run_agent(["rsh", "127.0.0.1", "echo", "up"],
                  env={**env, "DISTJOB_RDZV_TOKEN": TOKEN})
    assert r.returncode == 0 and r.stdout == "up\n", r.stderr


# A Volcano MPI job as its mpi and svc plugins lay it out: tasks mpimaster
# and mpiworker, the host files under the volcano dir, the pod named
# <job>-<task>-<index>. Hosts are IP literals, which need no DNS wait.
def _volcano_mpi_job(tmp_path, worker_hosts=("127.0.0.1",)):
    volcano = tmp_path / "volcano"
    volcano.mkdir()
    (volcano / "mpimaster.host").write_text("127.0.0.2")
    if worker_hosts:
        (volcano / "mpiworker.host").write_text("\n".join(worker_hosts))
    return volcano


# A stand-in for mpirun: shows its arguments, the hostfile variables and
# each named file's text and mode, as the real one would find them.
FAKE_MPIRUN = """#!/bin/sh
echo "args: $*"
echo "rsh: $OMPI_MCA_plm_rsh_agent"
for v in OMPI_MCA_orte_default_hostfile PRTE_MCA_prte_default_hostfile \\
         HYDRA_HOST_FILE I_MPI_HYDRA_HOST_FILE; do
  eval f=\\$$v
  echo "$v=$f"
  if [ -n "$f" ]; then
    echo "mode $(stat -c %a "$f")"
    cat "$f"
  fi
done
"""


def _fake_mpirun(tmp_path):
    path = tmp_path / "mpirun"
    path.write_text(FAKE_MPIRUN)
    path.chmod(0o755)
    return str(path)


def _volcano_pod(tmp_path, volcano, task):
    """run's flags for pod 0 of `task`; no MPI flag among them."""
    return ["--volcano-dir", str(volcano), "--hostname", f"vj-{task}-0"]


def test_a_volcano_mpiworker_pod_serves_spawns_with_no_flags(
        run_agent, start_agent, tmp_path):
    volcano = _volcano_mpi_job(tmp_path)
    env = {**CLEAN_JOB_ENV, "DISTJOB_SPAWN_PORT": str(free_port()),
           "DISTJOB_SPAWN_HOST": "127.0.0.1"}
    pod = _volcano_pod(tmp_path, volcano, "mpiworker")
    # No token: refused, naming the Volcano task that made it a worker.
    r = run_agent(["run"] + pod, env=env)
    assert r.returncode == 2, r.stderr
    assert "Volcano task mpiworker" in r.stderr, r.stderr
    assert "--rdzv-token-file" in r.stderr, r.stderr
    # With the job's token, and no command (the worker runs none).
    log = tmp_path / "worker.log"
    start_agent(["run"] + pod, env={**env, "DISTJOB_RDZV_TOKEN": TOKEN},
                log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    assert "Volcano task mpiworker (hostname)" in log.read_text()
    r = run_agent(["rsh", "127.0.0.1", "echo", "up"],
                  env={**env, "DISTJOB_RDZV_TOKEN": TOKEN})
    assert r.returncode == 0 and r.stdout == "up\n", r.stderr


def _volcano_worker(start_agent, tmp_path, volcano, env):
    """A Volcano mpiworker pod's agent, serving; its log."""
    log = tmp_path / "worker.log"
    start_agent(["run"] + _volcano_pod(tmp_path, volcano, "mpiworker"),
                env={**env, "DISTJOB_SPAWN_HOST": "127.0.0.1"}, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    return log


def test_a_worker_reaps_what_its_commands_leave_behind(run_agent,
                                                       start_agent, tmp_path):
    """A command that leaves a process behind (as mpirun's daemons leave
    ranks, or a daemon forks away) hands it to the worker's agent, its
    subreaper here as PID 1 is in a pod: once it ends it is reaped, not
    left a zombie in the job's process group until the pod goes."""
    volcano = _volcano_mpi_job(tmp_path)
    env = {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
           "DISTJOB_SPAWN_PORT": str(free_port())}
    _volcano_worker(start_agent, tmp_path, volcano, env)
    r = run_agent(["rsh", "127.0.0.1", "sleep 0.3 >/dev/null 2>&1 & echo $!"],
                  env=env)
    assert r.returncode == 0, r.stderr
    orphan = int(r.stdout)
    wait_for(lambda: not os.path.exists(f"/proc/{orphan}"), 10,
             what=f"the orphan {orphan} reaped")


def _launcher_env(tmp_path):
    tmp = tmp_path / "launcher-tmp"
    tmp.mkdir()
    return {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
            "DISTJOB_SPAWN_PORT": str(free_port()), "TMPDIR": str(tmp)}


def test_a_volcano_mpimaster_writes_a_hostfile_from_the_workers(
        run_agent, start_agent, tmp_path):
    volcano = _volcano_mpi_job(tmp_path)
    env = _launcher_env(tmp_path)
    _volcano_worker(start_agent, tmp_path, volcano, env)
    mpirun = _fake_mpirun(tmp_path)
    r = run_agent(["run", "--nproc-per-node", "2"]
                  + _volcano_pod(tmp_path, volcano, "mpimaster")
                  + ["--", mpirun, "-np", "2", "prog"], env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # The command as given; the hostfile through each MPI's variable.
    assert "args: -np 2 prog\n" in out, out
    assert " rsh" in out.split("rsh: ", 1)[1].splitlines()[0], out
    private = str(tmp_path / "launcher-tmp" / "distjob-mpi-")
    for var in ("OMPI_MCA_orte_default_hostfile",
                "PRTE_MCA_prte_default_hostfile"):
        assert f"{var}={private}" in out and "/hostfile\n" in out, out
    for var in ("HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE"):
        assert f"{var}={private}" in out, out
    assert "127.0.0.1 slots=2\n" in out, out
    assert "127.0.0.1:2\n" in out, out
    assert "mode 600" in out and "mode 644" not in out, out
    assert "Volcano task mpimaster (hostname)" in r.stderr, r.stderr
    # The launcher's private directory goes with the run.
    assert not list((tmp_path / "launcher-tmp").glob("distjob-mpi-*"))


def test_a_hostfile_the_command_names_is_kept(run_agent, start_agent,
                                              tmp_path):
    volcano = _volcano_mpi_job(tmp_path)
    env = _launcher_env(tmp_path)
    _volcano_worker(start_agent, tmp_path, volcano, env)
    r = run_agent(["run"] + _volcano_pod(tmp_path, volcano, "mpimaster")
                  + ["--", _fake_mpirun(tmp_path), "-H", "127.0.0.1",
                     "prog"], env=env)
    assert r.returncode == 0, r.stderr
    assert "OMPI_MCA_orte_default_hostfile=\n" in r.stdout, r.stdout
    assert "HYDRA_HOST_FILE=\n" in r.stdout, r.stdout


def test_a_volcano_mpimaster_with_no_worker_hosts_exits_2(run_agent,
                                                          tmp_path):
    volcano = _volcano_mpi_job(tmp_path, worker_hosts=())
    r = run_agent(["run"] + _volcano_pod(tmp_path, volcano, "mpimaster")
                  + ["--", _fake_mpirun(tmp_path)],
                  env=_launcher_env(tmp_path))
    assert r.returncode == 2, r.stderr
    # One line names every place the worker hosts could have come from.
    assert any("mpiworker.host" in line and "VC_MPIWORKER_HOSTS" in line
               and "MPI_HOST" in line for line in r.stderr.splitlines()), \
        r.stderr
    assert "args:" not in r.stdout


def test_env_explain_shows_a_volcano_launchers_role_hosts_and_variables(
        run_agent, tmp_path):
    volcano = _volcano_mpi_job(tmp_path, ("10.0.0.7", "10.0.0.8"))
    pod = _volcano_pod(tmp_path, volcano, "mpimaster")
    env = _launcher_env(tmp_path)
    r = run_agent(["env", "--explain"] + pod + ["--", "mpirun", "prog"],
                  env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "# MPI launcher  # Volcano task mpimaster (hostname)" in lines
    hosts = [line for line in lines if line.startswith("# hosts ")]
    assert hosts == [f"# hosts 10.0.0.7,10.0.0.8  # task mpiworker: "
                     f"volcano file {volcano}/mpiworker.host"], r.stdout
    rsh = [line for line in lines
           if line.startswith("OMPI_MCA_plm_rsh_agent=")]
    assert len(rsh) == 1 and " rsh  # MPI launcher" in rsh[0], r.stdout
    assert any(line.startswith("# HYDRA_HOST_FILE: decided at launch")
               and "mpiworker.host" in line
               for line in lines), r.stdout
    r = run_agent(["env", "--json", "--explain"] + pod
                  + ["--", "mpirun", "prog"], env=env)
    doc = json.loads(r.stdout)
    assert doc["framework"] == "mpi"
    mpi = doc["mpi"]
    assert mpi["role"] == "launcher" and mpi["hostfile_written"] is True
    assert mpi["hosts"] == ["10.0.0.7", "10.0.0.8"]
    assert "OMPI_MCA_orte_default_hostfile" in mpi["undecided"]
    assert mpi["env"]["HYDRA_LAUNCHER"] == "ssh"


def test_env_explain_names_the_flag_or_operator_variable_of_a_role(
        run_agent):
    r = run_agent(["env", "--explain"],
                  env={**CLEAN_JOB_ENV, "K_MPI_JOB_ROLE": "worker",
                       "DISTJOB_RDZV_TOKEN": TOKEN})
    assert r.returncode == 0, r.stderr
    assert ("# MPI worker  # env K_MPI_JOB_ROLE=worker (Kubeflow MPIJob v2)"
            in r.stdout.splitlines()), r.stdout
    r = run_agent(["env", "--explain", "--framework", "mpi", "--peers",
                   "worker=w0,w1", "--", "mpirun", "prog"],
                  env={**CLEAN_JOB_ENV})
    assert r.returncode == 0, r.stderr
    assert "# MPI launcher  # flag --framework mpi" in r.stdout, r.stdout
    assert "# hosts w0,w1  # task worker: flag --peers" in r.stdout, r.stdout


def test_a_volcano_mpi_pods_log_names_no_framework_before_its_role(
        start_agent, tmp_path):
    """Discovery names no framework from the tasks mpimaster/mpiworker; the
    MPI plan names the role after it. The log must not say "framework
    none" for a pod that then serves as an MPI worker."""
    volcano = _volcano_mpi_job(tmp_path)
    env = {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
           "DISTJOB_SPAWN_PORT": str(free_port())}
    text = _volcano_worker(start_agent, tmp_path, volcano, env).read_text()
    assert "framework none" not in text, text
    assert "framework is decided after discovery" in text, text
    assert "Volcano task mpiworker (hostname)" in text, text


# A pod of Kubeflow Trainer v2's MPI runtime for TrainJob tm: the JobSet's
# pod <tm>-<replicated job>-0-<index> with JOB_COMPLETION_INDEX; the
# launcher's has the plugin's OMPI_MCA_orte_default_hostfile (here a file
# under tmp_path standing in for /etc/mpi/hostfile).
def _trainer_pod(tmp_path, rjob, env, hostfile=None):
    pod = {**env, "JOB_COMPLETION_INDEX": "0",
           "DISTJOB_POD_LABELS_FILE": str(tmp_path / "no-labels")}
    if hostfile is not None:
        pod["OMPI_MCA_orte_default_hostfile"] = str(hostfile)
    return ["--hostname", f"tm-{rjob}-0-0"], pod


def test_a_trainer_v2_mpi_launcher_needs_no_flags(run_agent, start_agent,
                                                  tmp_path):
    env = _launcher_env(tmp_path)
    log = tmp_path / "worker.log"
    # The runtime's node pods say their role (nothing marks them as MPI).
    start_agent(["run", "--framework", "mpi", "--role", "worker",
                 "--spawn-host", "127.0.0.1"], env=env, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    hostfile = tmp_path / "mpi-hostfile"
    hostfile.write_text("127.0.0.1 slots=2\n")
    flags, pod = _trainer_pod(tmp_path, "launcher", env, hostfile)
    r = run_agent(["run"] + flags + ["--", _fake_mpirun(tmp_path), "-np",
                                     "2", "prog"], env=pod)
    assert r.returncode == 0, r.stderr
    assert "args: -np 2 prog\n" in r.stdout, r.stdout
    assert " rsh" in r.stdout.split("rsh: ", 1)[1].splitlines()[0], r.stdout
    # The operator's hostfile is mpirun's, kept as it is.
    assert f"OMPI_MCA_orte_default_hostfile={hostfile}\n" in r.stdout
    assert "HYDRA_HOST_FILE=\n" in r.stdout, r.stdout
    assert ("Trainer v2 MPI launcher (replicated job launcher: hostname "
            "'tm-launcher-0-0'") in r.stderr, r.stderr


def test_env_explain_shows_a_trainer_v2_launcher_and_no_role_for_nodes(
        run_agent, tmp_path):
    hostfile = tmp_path / "mpi-hostfile"
    hostfile.write_text("tm-node-0-0.tm slots=2\ntm-node-0-1.tm slots=2\n")
    env = _launcher_env(tmp_path)
    flags, pod = _trainer_pod(tmp_path, "launcher", env, hostfile)
    r = run_agent(["env", "--json", "--explain"] + flags
                  + ["--", "mpirun", "prog"], env=pod)
    assert r.returncode == 0, r.stderr
    mpi = json.loads(r.stdout)["mpi"]
    assert mpi["role"] == "launcher", mpi
    assert "Trainer v2 MPI launcher" in mpi["role_source"], mpi
    assert mpi["hosts"] == ["tm-node-0-0.tm", "tm-node-0-1.tm"], mpi
    assert mpi["hostfile_written"] is False, mpi
    # A node pod, or a launcher without the operator's hostfile: no MPI
    # role without flags.
    for rjob, named in (("node", hostfile), ("launcher", None)):
        flags, pod = _trainer_pod(tmp_path, rjob, env, named)
        r = run_agent(["env", "--json"] + flags + ["--", "prog"], env=pod)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["framework"] != "mpi", r.stdout
