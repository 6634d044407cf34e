"""A node whose agent was frozen (SIGSTOP: a stalled VM, a debugger, a
cgroup freeze) while its worker went on training: the other nodes moved on
to a new round without it. When the agent resumes and finds its round gone,
it stops its workers first, before anything else."""

import signal


from harness import CLEAN_JOB_ENV, free_port, pid_alive, wait_for

# Records its pid (one line per start), then trains forever.
WORKER = 'echo $$ >> "$PIDS"; while true; do sleep 0.05; done'


def test_resumed_agent_stops_its_stale_workers_first(start_agent, tmp_path):
    port = free_port()
    conf = ("join_timeout=30,last_call_timeout=0.5,keep_alive_interval=0.5,"
            "keep_alive_max_attempt=2")
    procs, pids = {}, {}
    for name, host in (("a", 1), ("b", 0)):
        pids[name] = tmp_path / f"{name}.pids"
        procs[name] = start_agent(
            ["run", "--nnodes", "1:2", "--nproc-per-node", "1",
             "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
             "--rdzv-id", "frozen", "--rdzv-conf", f"is_host={host},{conf}",
             "--max-restarts", "3", "--no-python", "--", "/bin/sh", "-c",
             WORKER],
            env=dict(CLEAN_JOB_ENV, PIDS=str(pids[name])),
            log=tmp_path / f"{name}.log")

    def log(name):
        return (tmp_path / f"{name}.log").read_text()

    def started(name):
        path = pids[name]
        return path.read_text().split() if path.exists() else []

    # b in a round of two, its worker of that round running.
    wait_for(lambda: "group rank 1 of 2" in log("b")
             and len(started("b")) == log("b").count("group rank"), 30,
             what="b in a round of 2 with its worker")
    stale = int(started("b")[-1])
    a_before = len(log("a"))

    procs["b"].send_signal(signal.SIGSTOP)
    # Before the try: a failure inside it must not surface as a NameError.
    b_before = len(log("b"))
    try:
        # a's lease check drops b and closes a round of one without it,
        # while b's worker goes on in the old round.
        wait_for(lambda: "group rank 0 of 1" in log("a")[a_before:], 30,
                 what="a round without the frozen node")
        assert pid_alive(stale), "the frozen node's worker should still run"
    finally:
        procs["b"].send_signal(signal.SIGCONT)

    def stale_gone():
        alive = pid_alive(stale)
        if alive:
            assert "group rank" not in log("b")[b_before:], (
                "b closed a new round while its stale worker still ran:\n"
                + log("b"))
        return not alive

    wait_for(stale_gone, 10, what="the stale worker's end")
    # Then b rejoins the job and trains again.
    wait_for(lambda: len(started("b")) >= 2 and "group rank" in
             log("b")[b_before:], 30, what="b back in the job")
    assert procs["a"].poll() is None, log("a")
    assert procs["b"].poll() is None, log("b")
