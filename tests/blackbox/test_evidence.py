"""Evidence before every stop or kill the agent decides (issue 40, item 3):
what each worker was doing, in attempt_<n>/diagnostics.json beside its
logs, summarised in the log and the event log, named in the termination
message; a worker's own server (TORCH_WORKER_SERVER_SOCKET) is asked, and
one that never answers costs at most --evidence-budget."""

import json
import textwrap
import time

import pytest

from harness import PYTHON, torch_available

# Real training: two gloo ranks, an all_reduce every step and a heartbeat
# before it. Rank 1 stops itself (SIGSTOP, as a debugger or a stuck
# container runtime leaves a process) at step 3; rank 0 then blocks in the
# collective. faulthandler dumps every thread's stack on SIGUSR1.
HUNG_DDP = textwrap.dedent("""
    import faulthandler, os, pathlib, signal, time
    import torch, torch.distributed as dist
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    heartbeat = pathlib.Path(os.environ["DISTJOB_HEARTBEAT_FILE"])
    t = torch.ones(8)
    for step in range(10000):
        heartbeat.touch()
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGSTOP)
        dist.all_reduce(t)
        time.sleep(0.05)
""")


def read_diagnostics(log_dir, attempt=0):
    return json.loads((log_dir / f"attempt_{attempt}" /
                       "diagnostics.json").read_text())


@pytest.mark.skipif(not torch_available(), reason="needs python3-torch")
def test_a_hung_collective_leaves_both_ranks_stacks_and_states(
        run_agent, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(HUNG_DDP)
    logs = tmp_path / "logs"
    events = tmp_path / "events.jsonl"
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2",
                   "--hang-timeout", "3", "--first-heartbeat-timeout", "60",
                   "--hang-signal", "SIGUSR1", "--max-restarts", "0",
                   "--log-dir", str(logs),
                   "--event-log-handler", f"file:{events}",
                   "--no-python", PYTHON, str(script)], timeout=120)
    assert r.returncode >= 128, r.stderr  # a hang is retryable
    d = read_diagnostics(logs)
    first = d["collections"][0]
    assert "hung" in first["reason"], first
    states = {w["local_rank"]: w["processes"][0] for w in first["workers"]}
    assert set(states) == {0, 1}, first
    # Rank 1 is stopped; rank 0 waits in the kernel (the collective).
    assert any(t["state"] == "T" for t in states[1]["threads"]), states[1]
    assert all(t["state"] != "T" for t in states[0]["threads"]), states[0]
    main0 = next(t for t in states[0]["threads"]
                 if t["tid"] == states[0]["pid"])
    assert main0["state"] == "S" and main0["wchan"], main0
    # Both ranks' Python stacks: rank 0's in the collective; rank 1's once
    # the agent continued it (a thread of its own may take the signal while
    # the main thread moves on, so only its script's frame is certain).
    tails = d["stderr_tails"]
    assert "most recent call first" in tails["0"], tails["0"]
    assert "all_reduce" in tails["0"], tails["0"]
    assert "most recent call first" in tails["1"], tails["1"]
    assert f'"{script}", line 1' in tails["1"], tails["1"]
    # Told in the log, the event log and the termination message.
    assert "evidence before stopping the workers" in r.stderr, r.stderr
    assert "stopped (T)" in r.stderr, r.stderr
    path = str(logs / "attempt_0" / "diagnostics.json")
    message = (tmp_path / "termination-log").read_text()
    assert f"diagnostics: {path}" in message, message
    kinds = [json.loads(line) for line in events.read_text().splitlines()]
    diag = [e for e in kinds if e.get("event") == "diagnostics"]
    assert diag and diag[0]["path"] == path, kinds


# A worker serving torch's control plane on TORCH_WORKER_SERVER_SOCKET
# (HTTP over a Unix socket, handlers POSTed under /handler/), and a sibling
# that fails at once, so the agent stops the server's worker.
SERVED = textwrap.dedent("""
    import http.server, os, socketserver, sys, time
    path = os.environ["TORCH_WORKER_SERVER_SOCKET"]
    if os.environ["LOCAL_RANK"] == "1":
        time.sleep(1)
        sys.exit(1)
    mode = sys.argv[1]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # a Unix peer has no address to log
            pass

        def do_POST(self):
            if mode == "silent":
                time.sleep(3600)
            name = self.path.rsplit("/", 1)[-1]
            body = ('{"handler": "%s", "entries": [1, 2]}' % name).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
        daemon_threads = True

    Server(path, Handler).serve_forever()
""")


def run_served(run_agent, tmp_path, mode, budget):
    script = tmp_path / "served.py"
    script.write_text(SERVED)
    logs = tmp_path / "logs"
    began = time.monotonic()
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2",
                   "--max-restarts", "0", "--log-dir", str(logs),
                   "--evidence-budget", str(budget),
                   "--no-python", PYTHON, str(script), mode], timeout=60)
    return r, read_diagnostics(logs), time.monotonic() - began


def test_a_workers_server_answers_land_in_the_diagnostics(run_agent,
                                                          tmp_path):
    r, d, _ = run_served(run_agent, tmp_path, "answer", 5)
    assert r.returncode == 1, r.stderr
    first = d["collections"][0]
    assert first["reason"] == "local_rank 1 failed", first
    served = {w["local_rank"]: w["worker_server"] for w in first["workers"]}
    assert served[0]["fr_trace_json"] == \
        '{"handler": "fr_trace_json", "entries": [1, 2]}', served
    assert json.loads(served[0]["wait_counter_values"])["handler"] == \
        "wait_counter_values", served


def test_a_server_that_never_answers_costs_at_most_the_budget(run_agent,
                                                              tmp_path):
    r, d, took = run_served(run_agent, tmp_path, "silent", 1)
    assert r.returncode == 1, r.stderr
    answers = d["collections"][0]["workers"][0]["worker_server"]
    assert answers["fr_trace_json"].startswith("error: "), answers
    assert d["collections"][0]["took_ms"] <= 1500, d["collections"][0]
    # The worker fails after 1 s; the rest is the budget and the stop.
    assert took < 10, (took, r.stderr)


def test_no_budget_no_evidence(run_agent, tmp_path):
    script = tmp_path / "served.py"
    script.write_text(SERVED)
    logs = tmp_path / "logs"
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2",
                   "--max-restarts", "0", "--log-dir", str(logs),
                   "--evidence-budget", "0",
                   "--no-python", PYTHON, str(script), "answer"], timeout=60)
    assert r.returncode == 1, r.stderr
    assert not (logs / "attempt_0" / "diagnostics.json").exists()
    assert "diagnostics" not in (tmp_path / "termination-log").read_text()
