"""Cluster DNS that lags behind the pods: a headless Service publishes a
pod's record only once it is Ready. Every agent waits for all its peers'
names (c-ares through the pod's resolv.conf and search path) before it
starts its workers."""

import json
import time

from harness import PYTHON
from multinode import STANDIN
from multinode import results_text

DNS_TIMEOUT = 6


def start_tf_job(c, out, env=None):
    full = {"OUT": str(out), "STANDIN_TIMEOUT": "30"}
    full.update(env or {})
    pods = c.start_all(["run", "--", PYTHON, str(STANDIN)], env=full)
    late = c.pods[f"{c.job}-worker-1"]
    for pod in pods:
        if pod is not late:
            c.mark_ready(pod)
    return pods, late


def test_record_ten_seconds_late_nobody_fails(make_cluster, artifacts):
    c = make_cluster("late", {"ps": 1, "worker": 2})
    out = artifacts / "standin"
    out.mkdir()
    pods, late = start_tf_job(c, out)
    published = time.monotonic() + 10
    c.mark_ready_later(late, 10)
    results = c.wait_all(timeout=60)
    for name, r in results.items():
        assert r.exit_code == 0, results_text(results)
    # They waited for the record rather than failing or guessing: the
    # others asked for the late name, and nobody's worker ran before it
    # existed (the stand-ins dialed every peer, by name).
    asked = {client for name, client in c.dns_queries()
             if name.startswith(late.host + ".")}
    assert {p.ip for p in pods if p is not late} <= asked, asked
    for pod in pods:
        seen = json.loads((out / f"{pod.name}.json").read_text())
        assert len(seen["reached"]) == 2, seen
        assert (out / f"{pod.name}.json").stat().st_mtime >= \
            time.time() - (time.monotonic() - published), pod.name
    assert c.leftover_processes() == {}


def test_record_never_appears_all_fail_retryable(make_cluster, artifacts):
    c = make_cluster("never", {"ps": 1, "worker": 2})
    out = artifacts / "standin"
    out.mkdir()
    pods, late = start_tf_job(
        c, out, env={"DISTJOB_DNS_TIMEOUT": str(DNS_TIMEOUT)})
    results = c.wait_all(timeout=DNS_TIMEOUT + 40)
    for name, r in results.items():
        # 138: retryable, the job controller may recreate the pods.
        assert r.exit_code == 138, results_text(results)
        assert late.host in r.stderr, results_text(results)
        assert late.host in r.termination_message, r.termination_message
    # No worker ran anywhere.
    assert not list(out.glob("*.json"))
    assert c.leftover_processes() == {}
