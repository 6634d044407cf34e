"""Invoked as `torchrun`, the agent is torchrun: scripts run with Python,
.py or not, and --log-dir has torchrun's <run_id>_<random>/ level. And one
launcher, not two: a worker command that is itself a torchrun launcher
takes the agent's place."""

import os
import subprocess

from harness import PYTHON, free_port


def torchrun_link(agent, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "torchrun").symlink_to(agent)
    return bindir


def test_script_without_py_runs_with_python(agent, tmp_path):
    bindir = torchrun_link(agent, tmp_path)
    script = tmp_path / "train"
    script.write_text("import os\nprint('py', os.environ['RANK'])\n")
    r = subprocess.run([str(bindir / "torchrun"), str(script)],
                       env={**os.environ, "PYTHON_EXEC": PYTHON,
                            "DISTJOB_TERMINATION_LOG": str(tmp_path / "t")},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "py 0\n"


def test_log_dir_has_torchruns_run_level(agent, tmp_path):
    bindir = torchrun_link(agent, tmp_path)
    logs = tmp_path / "logs"
    r = subprocess.run([str(bindir / "torchrun"), "--log-dir", str(logs),
                        "--rdzv-id", "job7", "--redirects", "1",
                        "--no-python", "sh", "-c", "echo hi"],
                       env={**os.environ,
                            "DISTJOB_TERMINATION_LOG": str(tmp_path / "t")},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    runs = [p.name for p in logs.iterdir()]
    assert len(runs) == 1 and runs[0].startswith("job7_"), runs
    assert (logs / runs[0] / "attempt_0" / "0" / "stdout.log").read_text() \
        == "hi\n"


def test_shell_running_torchrun_under_the_agent_is_one_launcher(
        agent, run_agent, tmp_path):
    bindir = torchrun_link(agent, tmp_path)
    port = free_port()
    # Kubeflow-style variables both launchers see: two launchers would both
    # try to host this store and join this rendezvous.
    env = {"PATH": f"{bindir}:{os.environ['PATH']}",
           "PET_NNODES": "1", "PET_RDZV_BACKEND": "c10d",
           "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}", "PET_RDZV_ID": "j1"}
    r = run_agent(["run", "--", "bash", "-c",
                   "torchrun --nproc-per-node 2 --no-python sh -c "
                   "'echo ws=$WORLD_SIZE'"], env=env, timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ws=2", "ws=2"]
    assert "handing over to it" in r.stderr


def test_handover_names_the_agent_options_it_drops(run_agent, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    inner = bindir / "torchrun"
    inner.write_text("#!/bin/sh\necho inner \"$@\"\n")
    inner.chmod(0o755)
    r = run_agent(["run", "--nproc-per-node", "2", "--max_restarts=3",
                   "--", "torchrun", "--nnodes", "1", "train.py"],
                  env={"PATH": f"{bindir}:{os.environ['PATH']}"}, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "inner --nnodes 1 train.py\n"
    assert ("the agent's options are not passed on to the launcher it hands "
            "over to (it reads its own options and the PET_* variables): "
            "--nproc-per-node, --max_restarts dropped") in r.stderr
    assert len([line for line in r.stderr.splitlines()
                if "not passed on" in line]) == 1
    # Nothing given, nothing dropped: no warning.
    r = run_agent(["run", "--", "torchrun", "train.py"],
                  env={"PATH": f"{bindir}:{os.environ['PATH']}"}, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "not passed on" not in r.stderr
