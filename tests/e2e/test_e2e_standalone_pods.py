"""Scenarios the agent can run today: one standalone job per pod, stopped
the way the kubelet stops a pod, or failing on its own."""

import json
import os
import re
import signal
import time

import pytest

from harness import PYTHON, wait_for

GRACE = 10  # --shutdown-timeout: the pod's terminationGracePeriodSeconds

# A training stand-in: marks itself started, and on SIGTERM does a short
# cleanup (a checkpoint) before exiting, as a well-behaved trainer does.
TRAP_TERM_WORKER = (
    'me="$OUT/$(hostname).$LOCAL_RANK"; '
    'trap \'echo saving > "$me.cleanup"; sleep 0.3; '
    'echo saved > "$me.cleaned"; exit 143\' TERM; '
    'echo up > "$me.started"; '
    'while :; do sleep 1 & wait $!; done')


def started(out, pods, nproc):
    return all((out / f"{p.name}.{r}.started").exists()
               for p in pods for r in range(nproc))


@pytest.mark.parametrize("pid_namespace", [True, False],
                         ids=["agent-is-pid1", "agent-not-pid1"])
def test_sigterm_to_every_pod_stops_within_grace(make_cluster, artifacts,
                                                  pid_namespace):
    c = make_cluster("term", {"master": 1, "worker": 1},
                     pid_namespace=pid_namespace)
    out = artifacts / "markers"
    out.mkdir()
    pods = c.start_all(["run", "--standalone", "--nproc-per-node", "2",
                        "--shutdown-timeout", str(GRACE), "--",
                        "sh", "-c", TRAP_TERM_WORKER], env={"OUT": str(out)})
    for pod in pods:
        c.mark_ready(pod)
    wait_for(lambda: started(out, pods, 2), 20, what="every worker to start")

    results = c.stop_all_within(pods, GRACE, slack=5)
    # Stopped gracefully, not killed: every worker got the forwarded TERM
    # and finished its cleanup.
    for pod in pods:
        for rank in range(2):
            assert (out / f"{pod.name}.{rank}.cleaned").exists(), \
                (pod.name, rank, results[pod.name].stderr)
    assert c.leftover_processes() == {}


def test_worker_exit_1_stops_that_pod_promptly(make_cluster, artifacts):
    c = make_cluster("fail", {"master": 1, "worker": 1})
    out = artifacts / "markers"
    out.mkdir()
    master, worker = c.pods["fail-master-0"], c.pods["fail-worker-0"]
    c.start_pod("master", 0,
                ["run", "--standalone", "--shutdown-timeout", str(GRACE),
                 "--", "sh", "-c", TRAP_TERM_WORKER], env={"OUT": str(out)})
    # Local rank 1 fails permanently once its sibling is up; rank 0 would
    # train forever.
    failing = (
        'if [ "$LOCAL_RANK" = 1 ]; then '
        'while [ ! -e "$OUT/$(hostname).0.started" ]; do sleep 0.05; done; '
        'echo "loss is NaN at step 7" >&2; touch "$OUT/failed"; exit 1; fi; '
        + TRAP_TERM_WORKER)
    c.start_pod("worker", 0,
                ["run", "--standalone", "--nproc-per-node", "2",
                 "--shutdown-timeout", str(GRACE), "--", "sh", "-c", failing],
                env={"OUT": str(out)})
    for pod in (master, worker):
        c.mark_ready(pod)

    r = worker.wait(timeout=GRACE + 10)
    exited = time.time()
    assert r.exit_code == 1, (r.stderr, r.artifacts)
    # Promptly: the healthy sibling was stopped with TERM (and cleaned up),
    # not left to the SIGKILL at the end of the grace period.
    took = exited - os.stat(out / "failed").st_mtime
    assert took < GRACE / 2, f"exited {took:.1f}s after the failure"
    assert (out / "fail-worker-0.0.cleaned").exists()
    # The outputs were collected: the worker's own stderr and the agent's
    # account naming the failed worker and its code.
    assert "loss is NaN at step 7" in r.stderr
    assert re.search(r"local_rank 1\b.*exit code 1\b", r.stderr), r.stderr
    assert (r.artifacts / "exit-code").read_text() == "1\n"
    assert worker.processes() == []

    # A standalone job per pod: the other pod keeps training.
    assert master.running()
    c.kill_agent(master, signal.SIGTERM)
    assert master.wait(timeout=GRACE).exit_code == 143


# A trainer that fails the way torchelastic reports it: @record writes the
# exception into the worker's TORCHELASTIC_ERROR_FILE.
RECORDED_FAILURE = (
    "from torch.distributed.elastic.multiprocessing.errors import record\n"
    "@record\n"
    "def main():\n"
    "    raise RuntimeError('loss is NaN at step 7')\n"
    "main()\n")


def test_worker_exit_1_reports_root_cause(make_cluster):
    c = make_cluster("cause", {"worker": 1})
    pod = c.start_pod("worker", 0,
                      ["run", "--standalone", "--no-python", "--", PYTHON,
                       "-c", RECORDED_FAILURE])
    r = pod.wait(timeout=60)
    assert r.exit_code == 1, r.stderr
    assert "permanent" in r.termination_message, r.termination_message
    assert "loss is NaN at step 7" in r.termination_message
    assert r.error_file is not None, f"no {pod.error_file}"
    assert r.error_file["message"]["errorCode"] == 1, r.error_file
    assert "loss is NaN at step 7" in json.dumps(r.error_file)
