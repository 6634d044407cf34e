"""Who the MPI spawn service lets in, against the built binary.

A worker agent (`run --framework mpi --role worker`) runs any command its
caller sends, so these tests call it as an attacker on the pod network
would: with a raw gRPC client (Debian's python3-grpcio, SpawnRequest and
SpawnReply of proto/spawn.proto encoded by hand, no generated code) and
commands that would leave a file behind, so that "refused" also shows that
nothing ran. test_mpi_cli.py covers `rsh` with a wrong token and with the
right one; here: no token, malformed and wrong tokens, another job's token,
and mutual TLS with real certificates (made by the openssl CLI at test
time), including mpirun over it.
"""

import re
import shutil
import subprocess
import textwrap
import threading

import grpc
import pytest

from harness import (CLEAN_JOB_ENV, PYTHON, free_port, make_certs, pb_fields,
                     pb_int, pb_len, wait_for)

SPAWN = "/distjob.spawn.Spawner/Spawn"
TOKEN = "spawn-tok-V3nq8Rz1Lw"
OTHER_JOB_TOKEN = "spawn-tok-other-job-9Xk2"


def bearer(token):
    return [("authorization", f"Bearer {token}")]


def spawn_call(channel, command, metadata=None, timeout=30, wait=True):
    """One Spawn call as `rsh` makes it: the command, its stdin's end, and
    the call kept open until the exit status, so that a command let in
    runs to its end. (stdout, stderr, exit status or 128+signal or None);
    a refusal raises grpc.RpcError. `wait`: for the server to be reachable
    (False: a connection that fails, fails the call at once)."""
    ended = threading.Event()

    def requests():
        yield pb_len(1, command)  # command
        yield pb_int(3, 1)  # stdin_close
        # Closing our side before the end would end the command: wait.
        ended.wait(timeout)

    out, err, status = b"", b"", None
    try:
        for reply in channel.stream_stream(SPAWN)(
                requests(), metadata=metadata, timeout=timeout,
                wait_for_ready=wait):
            for num, value in pb_fields(reply):
                if num == 1:
                    out += value
                elif num == 2:
                    err += value
                elif num in (3, 4):
                    status = value if num == 3 else 128 + value
                    ended.set()
    finally:
        ended.set()
    return out, err, status


def start_worker(start_agent, tmp_path, host, env, extra=()):
    """A worker agent serving spawns on `host`; its log."""
    log = tmp_path / f"worker-{host}.log"
    start_agent(["run", "--framework", "mpi", "--role", "worker",
                 "--spawn-host", host, *extra], env=env, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what=f"the spawn server on {host}")
    return log


def token_env(token, port):
    return {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": token,
            "DISTJOB_SPAWN_PORT": str(port)}


def test_calls_without_the_jobs_token_are_refused_and_run_nothing(
        start_agent, tmp_path):
    port = free_port("127.0.0.2")
    log = start_worker(start_agent, tmp_path, "127.0.0.2",
                       token_env(TOKEN, port))
    marker = tmp_path / "ran"
    headers = {
        "no token": None,
        "a wrong token": bearer("wrong-" + TOKEN),
        "the token cut short": bearer(TOKEN[:-1]),
        "the token and more": bearer(TOKEN + "x"),
        "no Bearer scheme": [("authorization", TOKEN)],
        "another header": [("x-token", TOKEN)],
    }
    with grpc.insecure_channel(f"127.0.0.2:{port}") as channel:
        for case, metadata in headers.items():
            with pytest.raises(grpc.RpcError) as refused:
                spawn_call(channel, f"touch {marker}", metadata)
            assert refused.value.code() == \
                grpc.StatusCode.UNAUTHENTICATED, case
            assert not marker.exists(), case
        # The same client with the job's token runs the same command: the
        # refusals above were the token's, not the client's.
        out, _, status = spawn_call(
            channel, f"touch {marker} && echo ran", bearer(TOKEN))
    assert (out, status) == (b"ran\n", 0)
    assert marker.exists()
    text = log.read_text()
    assert "refused a call" in text
    assert TOKEN not in text


def test_another_jobs_token_is_refused(start_agent, tmp_path):
    """A peer outside the job: a pod of another job, with that job's own
    valid token, on the same network."""
    port = free_port("127.0.0.2")
    start_worker(start_agent, tmp_path, "127.0.0.2", token_env(TOKEN, port))
    start_worker(start_agent, tmp_path, "127.0.0.3",
                 token_env(OTHER_JOB_TOKEN, port))
    marker = tmp_path / "ran"
    with grpc.insecure_channel(f"127.0.0.2:{port}") as job:
        with pytest.raises(grpc.RpcError) as refused:
            spawn_call(job, f"touch {marker}", bearer(OTHER_JOB_TOKEN))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert not marker.exists()
    # That token is good where it belongs.
    with grpc.insecure_channel(f"127.0.0.3:{port}") as other:
        _, _, status = spawn_call(other, f"touch {marker}",
                                  bearer(OTHER_JOB_TOKEN))
    assert status == 0 and marker.exists()


# --- mutual TLS, no token ---------------------------------------------------

def tls_flags(certs):
    return ["--rdzv-tls-cert", str(certs / "node.pem"), "--rdzv-tls-key",
            str(certs / "node.key"), "--rdzv-tls-ca", str(certs / "ca.pem")]


def tls_env(certs, port, ca=None):
    """What `rsh` reads (its command line is ssh's): the TLS variables,
    and no token."""
    return {**CLEAN_JOB_ENV, "DISTJOB_SPAWN_PORT": str(port),
            "DISTJOB_RDZV_TLS_CERT": str(certs / "node.pem"),
            "DISTJOB_RDZV_TLS_KEY": str(certs / "node.key"),
            "DISTJOB_RDZV_TLS_CA": str(ca or certs / "ca.pem")}


@pytest.fixture
def tls_job(start_agent, tmp_path):
    """The job's CA and a worker on 127.0.0.2 with its certificate and no
    token; another CA's certificate (a peer outside the job)."""
    job = tmp_path / "job"
    job.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    certs, outsider = make_certs(job), make_certs(other)
    port = free_port("127.0.0.2")
    env = {**CLEAN_JOB_ENV, "DISTJOB_SPAWN_PORT": str(port)}
    start_worker(start_agent, tmp_path, "127.0.0.2", env,
                 extra=tls_flags(certs))
    return {"certs": certs, "outsider": outsider, "port": port}


def test_rsh_with_the_jobs_certificate_runs_and_returns_the_status(
        run_agent, tls_job):
    r = run_agent(["rsh", "127.0.0.2", "echo", "over-mtls;", "exit", "7"],
                  env=tls_env(tls_job["certs"], tls_job["port"]))
    assert r.returncode == 7, r.stderr
    assert r.stdout == "over-mtls\n"


def test_rsh_with_another_cas_certificate_is_refused_and_runs_nothing(
        run_agent, tls_job, tmp_path):
    """The outsider trusts the job's CA (it is no secret) but holds a
    certificate of its own CA."""
    marker = tmp_path / "ran"
    r = run_agent(["rsh", "127.0.0.2", f"touch {marker}"],
                  env=tls_env(tls_job["outsider"], tls_job["port"],
                              ca=tls_job["certs"] / "ca.pem"))
    assert r.returncode == 255, r.stderr
    assert "127.0.0.2:" in r.stderr
    assert not marker.exists()


def test_raw_clients_without_the_jobs_certificate_are_refused(tls_job,
                                                              tmp_path):
    certs, outsider = tls_job["certs"], tls_job["outsider"]
    target = f"127.0.0.2:{tls_job['port']}"
    ca = (certs / "ca.pem").read_bytes()
    marker = tmp_path / "ran"
    clients = {
        "another CA's certificate": grpc.ssl_channel_credentials(
            ca, (outsider / "node.key").read_bytes(),
            (outsider / "node.pem").read_bytes()),
        "no certificate": grpc.ssl_channel_credentials(ca),
    }
    for case, creds in clients.items():
        with grpc.secure_channel(target, creds) as channel:
            # The handshake fails: the connection, and so the call.
            with pytest.raises(grpc.RpcError) as refused:
                spawn_call(channel, f"touch {marker}", timeout=10,
                           wait=False)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, case
        assert not marker.exists(), case
    # Plaintext, even with a token: told the server speaks TLS (or, when
    # the server's close wins the race with its answer, a closed socket).
    with grpc.insecure_channel(target) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            spawn_call(channel, f"touch {marker}", bearer(TOKEN), timeout=10,
                       wait=False)
        code = refused.value.code()
        assert code in (grpc.StatusCode.FAILED_PRECONDITION,
                        grpc.StatusCode.UNAVAILABLE), code
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            assert "speaks TLS" in refused.value.details()
    assert not marker.exists()
    # The job's certificate, no token: it runs.
    with grpc.secure_channel(target, grpc.ssl_channel_credentials(
            ca, (certs / "node.key").read_bytes(),
            (certs / "node.pem").read_bytes())) as channel:
        _, _, status = spawn_call(channel, f"touch {marker}")
    assert status == 0 and marker.exists()


ALLREDUCE = textwrap.dedent("""
    import os
    from mpi4py import MPI
    c = MPI.COMM_WORLD
    total = c.allreduce(c.rank + 1, op=MPI.SUM)
    os.write(1, f"rank {c.rank}/{c.size} sum {total}\\n".encode())
""")


def test_mpirun_runs_an_allreduce_over_mutual_tls(run_agent, start_agent,
                                                   tmp_path):
    """The launcher and two workers with the job's certificates and no
    token: the launcher's wait, mpirun's rsh and Open MPI's tree spawn all
    go through mutual TLS."""
    if shutil.which("mpirun.openmpi") is None:
        pytest.fail("mpirun.openmpi is missing: run .ci/install-deps")
    job = tmp_path / "job"
    job.mkdir()
    certs = make_certs(job)
    workers = ("127.0.0.2", "127.0.0.3")
    port = free_port(workers[0])
    env = tls_env(certs, port)
    for host in workers:
        tmp = tmp_path / f"tmp-{host}"  # each pod has its own /tmp
        tmp.mkdir()
        start_worker(start_agent, tmp_path, host, {**env, "TMPDIR": str(tmp)})
    program = tmp_path / "allreduce.py"
    program.write_text(ALLREDUCE)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{h} slots=2\n" for h in workers))
    launcher_tmp = tmp_path / "tmp-launcher"
    launcher_tmp.mkdir()
    r = run_agent(
        ["run", "--framework", "mpi", "--spawn-wait", "60s", "--",
         "mpirun.openmpi", "--hostfile", str(hostfile), "-np", "4", PYTHON,
         str(program)],
        env={**env, "TMPDIR": str(launcher_tmp),
             "OMPI_ALLOW_RUN_AS_ROOT": "1",
             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
             # Both "nodes" are this machine (test_mpi_spawn.py says why).
             "OMPI_MCA_btl": "tcp,self"},
        timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    # One report per rank, wherever mpirun's forwarding put it on a line.
    sums = set(re.findall(r"rank \d+/\d+ sum \d+", r.stdout))
    assert sums == {f"rank {i}/4 sum 10" for i in range(4)}, r.stdout
    for host in workers:
        assert "orted" in (tmp_path / f"worker-{host}.log").read_text()
