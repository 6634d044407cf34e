"""Hostile input: values that are not what a
flag, file or variable accepts end `run` with exit 2 within a second and one
line naming the input and the accepted form. The job is a Volcano
TensorFlow pod whose peers' names never resolve (.invalid): a value that
slipped through would keep it waiting for minutes (or spinning) instead."""

import os
import time

import pytest

from harness import (CLEAN_JOB_ENV, VOLCANO_TF_UNRESOLVABLE, accepting,
                     free_port, wait_for)



def run_job(run_agent, volcano_dir, *args, env=None):
    start = time.monotonic()
    r = run_agent(["run", "--volcano-dir", str(volcano_dir), "--hostname",
                   "tfj-worker-1", *args, "--", "true"],
                  env={**VOLCANO_TF_UNRESOLVABLE, **(env or {})}, timeout=20)
    return r, time.monotonic() - start


def assert_refused(r, took, named):
    assert r.returncode == 2, r.stderr
    assert took < 1.5, f"took {took:.1f}s: checked after a wait"
    # One line says it (then, after discovery, the agent's summary line).
    lines = r.stderr.strip().splitlines()
    assert len(lines) <= 2, r.stderr[:2000]
    assert named in lines[0], lines[0]
    assert all(len(line) < 1000 for line in lines), r.stderr[:2000]


@pytest.mark.parametrize("args, named", [
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "http://tfj-ps-0:29400"],
     "--rdzv-endpoint"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "a:b:c"],
     "--rdzv-endpoint"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "tfj ps:29400"],
     "--rdzv-endpoint"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1",
      "--local-addr", "n" * 5000], "--local-addr"),
    (["--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1",
      "--rdzv-id", "j" * 5000], "--rdzv-id"),
    (["--local-addr", "-n"], "--local-addr"),
    (["--rdzv-conf", "keep_alive_interval=0"], "keep_alive_interval"),
    (["--rdzv-conf", "join_timeout=nan"], "join_timeout"),
    (["--rdzv-conf", "read_timeout=inf"], "read_timeout"),
    (["--rdzv-conf", "store_max_conns=5"], "store_max_conns"),
    (["--rdzv-conf", "store_max_value_kb=1e9"], "store_max_value_kb"),
    (["--dns-timeout", "1e300h"], "--dns-timeout"),
    (["--signals-to-handle", "SIGKILL,SIGCHLD"], "--signals-to-handle"),
    (["--nnodes", "2147483647", "--nproc-per-node", "2"], "--nnodes"),
    (["--rdzv-backend", "etcd"], "--rdzv-endpoint"),
    (["--rdzv-backend", "etcd", "--rdzv-endpoint", "unix:///run/etcd"],
     "--rdzv-endpoint"),
], ids=["endpoint-url", "endpoint-colons", "endpoint-space",
        "local-addr-long", "rdzv-id-long", "local-addr-dash",
        "keep-alive-0", "nan", "inf", "store-conns-low",
        "store-value-float", "overflow", "uncatchable-signals",
        "world-size-overflow", "etcd-empty", "etcd-garbage"])
def test_bad_values_exit_2_at_once(run_agent, tmp_path, args, named):
    r, took = run_job(run_agent, tmp_path, *args)
    assert_refused(r, took, named)


def test_100kb_multiline_value_is_quoted_cut_on_one_line(run_agent,
                                                          tmp_path):
    r, took = run_job(run_agent, tmp_path,
                      env={"PET_RDZV_ID": "x\ny " * 25000})
    assert_refused(r, took, "PET_RDZV_ID")
    assert "(100000 bytes)" in r.stderr


@pytest.mark.parametrize("content", [
    b"tfj-worker-0.tfj\ntfj worker 1.tfj\n",
    b"tfj-worker-0.tfj\n-rf\n",
    b"tfj-worker-0\0.tfj\ntfj-worker-1.tfj\n",
    b"\x7fELF\x02\x01\n\x01\0\0\0\n",
], ids=["space", "dash", "nul", "binary"])
def test_volcano_file_hosts_that_are_not_dns_names(run_agent, tmp_path,
                                                   content):
    (tmp_path / "worker.host").write_bytes(content)
    r, took = run_job(run_agent, tmp_path)
    assert_refused(r, took, "worker.host")


def test_fifo_in_volcano_dir_is_refused_by_type(run_agent, tmp_path):
    # Opened for reading, a FIFO with no writer blocks forever.
    os.mkfifo(tmp_path / "worker.host")
    r, took = run_job(run_agent, tmp_path)
    assert_refused(r, took, "worker.host")
    assert "FIFO" in r.stderr


def test_generated_env_over_the_kernel_limit_exits_2_naming_it(
        run_agent, tmp_path):
    # 10,000 workers by address (nothing to resolve): their TF_CONFIG is
    # over the kernel's 128 KiB per-string limit, which would make every
    # worker's exec fail with E2BIG.
    hosts = "\n".join(f"10.{i // 250}.{i % 250}.1" for i in range(10000))
    (tmp_path / "worker.host").write_text(hosts + "\n")
    (tmp_path / "ps.host").write_text("10.255.0.1\n")
    start = time.monotonic()
    r = run_agent(["run", "--volcano-dir", str(tmp_path), "--hostname",
                   "tfj-worker-1", "--no-barrier", "--", "true"],
                  env={**CLEAN_JOB_ENV, "VC_TASK_INDEX": "1",
                       "DISTJOB_JOB_NAME": "tfj", "DISTJOB_TASK": "worker",
                       "DISTJOB_FRAMEWORK": "tensorflow"}, timeout=20)
    took = time.monotonic() - start
    assert r.returncode == 2, r.stderr[-2000:]
    assert took < 5
    assert "TF_CONFIG" in r.stderr and "131072" in r.stderr
    assert "cannot execute" not in r.stderr


def test_second_agent_on_a_taken_health_port_exits_2(run_agent, start_agent,
                                                     tmp_path):
    port = free_port()
    first = start_agent(["run", "--health-port", str(port), "--", "sleep",
                         "30"], env=CLEAN_JOB_ENV)
    wait_for(lambda: accepting(port), timeout=10,
             what="first agent's health port")
    start = time.monotonic()
    r = run_agent(["run", "--health-port", str(port), "--", "true"],
                  env=CLEAN_JOB_ENV, timeout=20)
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - start < 2
    assert f"--health-port {port}" in r.stderr
    assert "taken" in r.stderr
    assert first.poll() is None
