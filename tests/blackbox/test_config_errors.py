"""Configuration errors end `run` with exit 2 within a second of start,
before the DNS wait, the start barrier or the rendezvous: the job below is a
Volcano TensorFlow pod whose peers' names never resolve (.invalid), so a
check left for later would keep it waiting for minutes instead."""

import time

import pytest

from harness import CLEAN_JOB_ENV, VOLCANO_TF_UNRESOLVABLE



def run_tf_job(run_agent, tmp_path, *args, env=None):
    empty = tmp_path / "no-volcano-files"
    empty.mkdir(exist_ok=True)
    start = time.monotonic()
    r = run_agent(["run", "--volcano-dir", str(empty), "--hostname",
                   "tfj-worker-1", *args, "--", "true"],
                  env={**VOLCANO_TF_UNRESOLVABLE, **(env or {})}, timeout=30)
    return r, time.monotonic() - start


def test_misspelled_rdzv_conf_key_names_the_closest_one(run_agent, tmp_path):
    r, took = run_tf_job(run_agent, tmp_path, "--rdzv-conf",
                         "join_timout=60")
    assert r.returncode == 2, r.stderr
    assert took < 2, f"took {took:.1f}s: checked after a wait"
    assert "'join_timout'" in r.stderr
    assert "did you mean 'join_timeout'?" in r.stderr
    # The pod's termination message says it too.
    assert "join_timout" in (tmp_path / "termination-log").read_text()


def test_misspelled_key_from_the_environment(run_agent, tmp_path):
    r, took = run_tf_job(run_agent, tmp_path,
                         env={"PET_RDZV_CONF": "last_call_timout=5"})
    assert r.returncode == 2, r.stderr
    assert took < 2
    assert "did you mean 'last_call_timeout'?" in r.stderr


@pytest.mark.parametrize("args, named", [
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "tfj-ps-0:http"],
     "tfj-ps-0:http"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "[fd00::1"], "[fd00::1"),
    (["--rdzv-backend", "zookeeper"], "zookeeper"),
    (["--rdzv-backend", "etcd", "--rdzv-conf", "cert=/c.pem"], "cert"),
    (["--redirects", "5"], "--redirects"),
    (["--nproc-per-node", "2", "--tee", "0:3,1:x"], "--tee"),
    (["--framework", "tensorflw"], "tensorflw"),
], ids=["endpoint-port", "endpoint-bracket", "backend", "etcd-conf", "redirects", "tee",
        "framework"])
def test_bad_values_exit_2_before_any_wait(run_agent, tmp_path, args, named):
    r, took = run_tf_job(run_agent, tmp_path, *args)
    assert r.returncode == 2, r.stderr
    assert took < 2, f"took {took:.1f}s: checked after a wait"
    assert named in r.stderr


def test_torchrun_only_key_is_a_notice_not_an_error(run_agent, tmp_path):
    # A one-node job with nothing to wait for: it runs, with a notice.
    r = run_agent(["run", "--rdzv-conf", "store_type=tcp,join_timeout=5",
                   "--", "true"], env=CLEAN_JOB_ENV, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "store_type=tcp" in r.stderr
    assert "does not use" in r.stderr
