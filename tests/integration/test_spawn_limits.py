"""The spawn service's output bound, against the built binary: a caller
that reads slowly slows its command instead of growing a queue in the
worker's agent, and output comes in chunks of at most 32 KiB (README,
"What the spawn service lets in"). The other bounds (64 commands, 128 KiB
messages, connections per address) are unit tests in
spawn/spawn_server_test.cc, with the limits shrunk.
"""

import threading

import grpc

from harness import (CLEAN_JOB_ENV, free_port, pb_fields, pb_int, pb_len,
                     pid_alive, wait_for)

SPAWN = "/distjob.spawn.Spawner/Spawn"
TOKEN = "spawn-limits-tok-4Hs8"
CHUNK = 32 * 1024
TOTAL = 64 * 1024 * 1024  # what the command writes
# What may sit between a command and a caller that reads nothing: its
# pipe (64 KiB), the pump's one chunk, gRPC's HTTP/2 windows and the
# loopback socket's buffers (a few MiB each). Far below TOTAL: a queue
# that grew with the output would take it all.
HELD_AT_MOST = 24 * 1024 * 1024


def written(pid):
    """Bytes process `pid` has written (/proc/PID/io), None once gone."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def test_a_slow_caller_blocks_the_command_not_the_agents_memory(
        start_agent, tmp_path):
    port = free_port()
    env = {**CLEAN_JOB_ENV, "DISTJOB_RDZV_TOKEN": TOKEN,
           "DISTJOB_SPAWN_PORT": str(port)}
    log = tmp_path / "worker.log"
    start_agent(["run", "--framework", "mpi", "--role", "worker",
                 "--spawn-host", "127.0.0.1"], env=env, log=log)
    wait_for(lambda: "serving the launcher's spawns" in log.read_text(), 30,
             what="the spawn server")
    pid_file = tmp_path / "writer.pid"
    done = tmp_path / "done"
    command = (f"head -c {TOTAL} /dev/zero & echo $! > {pid_file}; wait; "
               f"touch {done}")
    ended = threading.Event()

    def requests():
        yield pb_len(1, command)
        yield pb_int(3, 1)
        ended.wait(60)

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        replies = channel.stream_stream(SPAWN)(
            requests(), metadata=[("authorization", f"Bearer {TOKEN}")],
            timeout=60, wait_for_ready=True)
        try:
            # Read nothing until the writer stops making progress.
            wait_for(lambda: pid_file.exists() and pid_file.read_text(), 20,
                     what="the writer's pid")
            pid = int(pid_file.read_text())
            last = [-1]

            def stalled():
                now = written(pid)
                was, last[0] = last[0], now
                return now is None or now == was
            wait_for(stalled, 30, interval=0.3, what="the writer to block")
            held = written(pid)
            assert held is not None and pid_alive(pid), \
                "the command wrote everything to a caller that read nothing"
            assert held <= HELD_AT_MOST, held
            assert not done.exists()
            # Now read: everything arrives, one chunk at a time.
            out, status = 0, None
            for reply in replies:
                for num, value in pb_fields(reply):
                    if num == 1:
                        assert 0 < len(value) <= CHUNK, len(value)
                        out += len(value)
                    elif num == 3:
                        status = value
                        ended.set()
        finally:
            ended.set()
    assert (out, status) == (TOTAL, 0)
    assert done.exists()
