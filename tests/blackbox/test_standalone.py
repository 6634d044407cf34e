"""Standalone mode end to end: torchrun's worker environment, exit codes,
and stopping the rest of the group when one worker fails."""

import os
import re
import time

from harness import PYTHON, pid_alive

ENV_NAMES = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME",
             "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE",
             "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
             "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
             "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
             "OMP_NUM_THREADS", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
             "NCCL_ASYNC_ERROR_HANDLING"]


def dump_env_command(out_dir):
    names = " ".join(ENV_NAMES)
    return ["sh", "-c",
            f'for n in {names}; do eval "echo $n=\\${{$n-UNSET}}"; done '
            f'> {out_dir}/env.$LOCAL_RANK']


def read_env(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_issue_example_prints_ranks(run_agent):
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2", "--",
                   "sh", "-c", "echo $RANK/$WORLD_SIZE/$LOCAL_RANK"])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["0/2/0", "1/2/1"]


def test_worker_env_matches_torchrun_standalone(run_agent, tmp_path):
    r = run_agent(["run", "--standalone", "--nproc_per_node=3", "--"]
                  + dump_env_command(tmp_path),
                  env={"OMP_NUM_THREADS": "", "MASTER_PORT": "1",
                       "NCCL_ASYNC_ERROR_HANDLING": None})
    assert r.returncode == 0, r.stderr
    envs = [read_env(tmp_path / f"env.{i}") for i in range(3)]
    for i, env in enumerate(envs):
        assert env["LOCAL_RANK"] == str(i)
        assert env["RANK"] == str(i)
        assert env["ROLE_RANK"] == str(i)
        assert env["GROUP_RANK"] == "0"
        assert env["GROUP_WORLD_SIZE"] == "1"
        assert env["LOCAL_WORLD_SIZE"] == "3"
        assert env["WORLD_SIZE"] == "3"
        assert env["ROLE_WORLD_SIZE"] == "3"
        assert env["ROLE_NAME"] == "default"
        assert env["TORCHELASTIC_RESTART_COUNT"] == "0"
        assert env["TORCHELASTIC_MAX_RESTARTS"] == "0"
        # Current torchrun: the agent serves the workers' store.
        assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True"
        assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
        # 1.13's name too, as the design's worker-environment contract.
        assert env["NCCL_ASYNC_ERROR_HANDLING"] == "1"
        assert env["MASTER_ADDR"] == "127.0.0.1"
        assert re.fullmatch(r"[0-9a-f]{32}", env["TORCHELASTIC_RUN_ID"])
        # An empty OMP_NUM_THREADS is the user's setting: kept.
        assert env["OMP_NUM_THREADS"] == ""
    # One master port for the group, freshly picked (not the stale one).
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert envs[0]["MASTER_PORT"] != "1"
    assert len({e["TORCHELASTIC_RUN_ID"] for e in envs}) == 1


def test_run_ids_are_fresh_per_job(run_agent, tmp_path):
    ids = set()
    for attempt in range(2):
        out = tmp_path / str(attempt)
        out.mkdir()
        r = run_agent(["run", "--standalone", "--"] + dump_env_command(out))
        assert r.returncode == 0
        ids.add(read_env(out / "env.0")["TORCHELASTIC_RUN_ID"])
    assert len(ids) == 2


def test_omp_default_only_for_several_workers(run_agent, tmp_path):
    unset = {"OMP_NUM_THREADS": None}
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2", "--"]
                  + dump_env_command(tmp_path), env=unset)
    assert r.returncode == 0
    assert read_env(tmp_path / "env.0")["OMP_NUM_THREADS"] == "1"
    one = tmp_path / "one"
    one.mkdir()
    r = run_agent(["run", "--standalone", "--"] + dump_env_command(one),
                  env=unset)
    assert r.returncode == 0
    assert read_env(one / "env.0")["OMP_NUM_THREADS"] == "UNSET"


def test_pet_env_drives_the_job(run_agent, tmp_path):
    r = run_agent(["run", "--"] + dump_env_command(tmp_path),
                  env={"PET_STANDALONE": "", "PET_NPROC_PER_NODE": "2"})
    assert r.returncode == 0, r.stderr
    assert read_env(tmp_path / "env.1")["WORLD_SIZE"] == "2"


def test_nproc_cpu_and_auto_use_the_cpu_count(run_agent, tmp_path):
    for value in ["cpu", "auto"]:
        out = tmp_path / value
        out.mkdir()
        r = run_agent(["run", "--standalone", "--nproc-per-node", value,
                       "--"] + dump_env_command(out),
                      env={"CUDA_VISIBLE_DEVICES": ""})
        assert r.returncode == 0, r.stderr
        n = len(os.sched_getaffinity(0))
        assert read_env(out / "env.0")["LOCAL_WORLD_SIZE"] == str(n)


def test_py_script_runs_as_python3_unbuffered(run_agent, tmp_path):
    script = tmp_path / "show.py"
    script.write_text("import sys\nprint(sys.orig_argv[1:])\n")
    r = run_agent(["run", "--standalone", str(script), "a", "--b"],
                  env={"PYTHON_EXEC": PYTHON})
    assert r.returncode == 0, r.stderr
    assert f"['-u', '{script}', 'a', '--b']" in r.stdout


def test_all_succeed_exits_zero(run_agent):
    r = run_agent(["run", "--standalone", "--nproc-per-node", "4", "--",
                   "true"])
    assert r.returncode == 0


def test_failing_worker_code_and_others_stopped(run_agent, tmp_path):
    # Rank 1 fails with 3 while rank 0 would run for a minute; the agent
    # stops rank 0 (SIGTERM) and exits with 3.
    pidfile = tmp_path / "pid"
    script = (f'if [ "$LOCAL_RANK" = 0 ]; then echo $$ > {pidfile}; '
              'exec sleep 60; fi; '
              f'while [ ! -s {pidfile} ]; do sleep 0.01; done; exit 3')
    start = time.monotonic()
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2", "--",
                   "sh", "-c", script])
    assert r.returncode == 3, r.stderr
    assert time.monotonic() - start < 20
    assert not pid_alive(int(pidfile.read_text()))


def test_worker_ignoring_sigterm_is_killed_after_grace(run_agent, tmp_path):
    pidfile = tmp_path / "pid"
    script = (f'if [ "$LOCAL_RANK" = 0 ]; then trap "" TERM; '
              f'echo $$ > {pidfile}; while :; do sleep 0.05; done; fi; '
              f'while [ ! -s {pidfile} ]; do sleep 0.01; done; exit 5')
    start = time.monotonic()
    r = run_agent(["run", "--standalone", "--nproc-per-node", "2",
                   "--shutdown-timeout", "1", "--", "sh", "-c", script])
    elapsed = time.monotonic() - start
    assert r.returncode == 5, r.stderr
    assert 1.0 <= elapsed < 10, elapsed
    assert not pid_alive(int(pidfile.read_text()))


def test_killed_worker_exits_128_plus_signal(run_agent):
    r = run_agent(["run", "--standalone", "--", "sh", "-c", "kill -9 $$"])
    assert r.returncode == 137
