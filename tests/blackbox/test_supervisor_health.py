"""grpc.health.v1 probes of `distjob-agent run --health-port`, checked with
the agent's own gRPC client (`distjob-agent health`) across start, run,
restart and shutdown."""

import signal
import subprocess
import time

import pytest

from harness import free_port, wait_for


def probe(agent, port, service=None):
    args = [agent, "health", "--port", str(port)]
    if service is not None:
        args += ["--service", service]
    r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    return r.returncode, r.stdout.strip()


@pytest.fixture
def started(start_agent, tmp_path):
    def start(args):
        return start_agent(
            args, env={"DISTJOB_TERMINATION_LOG": str(tmp_path / "tlog")},
            log=tmp_path / "agent.stderr", stdout=subprocess.DEVNULL)
    return start


def test_health_states_across_restart_and_shutdown(agent, started,
                                                    tmp_path):
    port = free_port()
    first, second = tmp_path / "first", tmp_path / "second"
    p = started([
        "run", "--health-port", str(port), "--max-restarts", "1",
        "--restart-backoff", "3", "--shutdown-timeout", "3", "--", "sh", "-c",
        f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then touch {first}; '
        f'exit 200; fi; trap "" TERM; touch {second}; '
        f'while :; do sleep 0.1; done'])
    wait_for(first.exists, 10, what="first attempt")
    # Restart backoff: alive, not ready.
    wait_for(lambda: probe(agent, port, "readiness")
             == (1, "NOT_SERVING"), 5, what="readiness NOT_SERVING")
    assert probe(agent, port, "liveness") == (0, "SERVING")
    assert probe(agent, port) == (0, "SERVING")
    assert probe(agent, port, "no-such-service") == (1, "NOT_FOUND")
    # The second attempt runs: ready.
    wait_for(second.exists, 10, what="second attempt")
    wait_for(lambda: probe(agent, port, "readiness") == (0, "SERVING"), 5,
             what="readiness SERVING")
    start = time.monotonic()
    assert probe(agent, port, "readiness") == (0, "SERVING")
    assert time.monotonic() - start < 1
    # Shutdown: the worker ignores TERM for the 3 s grace period.
    p.send_signal(signal.SIGTERM)
    wait_for(lambda: probe(agent, port, "readiness") == (1, "NOT_SERVING"),
             2, what="readiness NOT_SERVING at shutdown")
    assert probe(agent, port, "liveness") == (0, "SERVING")
    assert p.wait(timeout=20) == 143


def test_health_client_fails_when_nothing_listens(agent):
    rc, _ = probe(agent, free_port())
    assert rc == 1


def test_health_client_rejects_bad_port(agent):
    r = subprocess.run([agent, "health", "--port", "x"], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2
    assert "--port" in r.stderr


def test_probes_answer_while_waiting_for_peers(agent, started):
    # Peers' DNS records appear only once their pods are Ready: an agent
    # that answered no probe while it waits for them would never be Ready
    # itself, and every pod of the job would wait for the others forever.
    port = free_port()
    p = started([
        "run", "--health-port", str(port), "--job-name", "j", "--task",
        "worker", "--task-index", "0", "--peers",
        "worker=j-worker-0.invalid,j-worker-1.invalid", "--dns-server",
        "127.0.0.1:9", "--dns-timeout", "60", "--", "true"])
    wait_for(lambda: probe(agent, port, "liveness")[0] == 0, 10,
             what="liveness SERVING during the DNS wait")
    assert probe(agent, port)[0] == 0  # "" (overall): the pod is Ready
    assert probe(agent, port, "readiness")[0] == 1  # no workers yet
    assert p.poll() is None  # still waiting for its peers
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 128 + signal.SIGTERM
