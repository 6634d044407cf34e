"""Who the MPI spawn service lets in, against the built binary.

A worker agent (`run --framework mpi --role worker`) runs any command its
caller sends, so these tests call it as an attacker on the pod network
would: with a raw gRPC client (Debian's python3-grpcio, SpawnRequest and
SpawnReply of proto/spawn.proto encoded by hand, no generated code) and
commands that would leave a file behind, so that "refused" also shows that
nothing ran. test_mpi_cli.py covers `rsh` with a wrong token and with the
right one; here: no token, malformed and wrong tokens, and another job's
token.
"""

import threading

import grpc
import pytest

from harness import (CLEAN_JOB_ENV, free_port, pb_fields, pb_int, pb_len,
                     wait_for)

SPAWN = "/distjob.spawn.Spawner/Spawn"
TOKEN = "spawn-tok-V3nq8Rz1Lw"
OTHER_JOB_TOKEN = "spawn-tok-other-job-9Xk2"


def bearer(token):
    return [("authorization", f"Bearer {token}")]


def spawn_call(channel, command, metadata=None, timeout=30):
    """One Spawn call as `rsh` makes it: the command, its stdin's end, and
    the call kept open until the exit status, so that a command let in
    runs to its end. (stdout, stderr, exit status or 128+signal or None);
    a refusal raises grpc.RpcError."""
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
                wait_for_ready=True):
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

