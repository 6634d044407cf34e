"""One launcher, always: the ENTRYPOINT pattern `distjob-agent run --
./run_train.sh`, whose script calls `torchrun` (the agent's own link), with
Kubeflow-style elastic PET_* variables. The inner agent must not join the
outer's rendezvous as a node (which made the outer kill it and open a new
round, forever): the outer steps aside and the inner runs the job, with
one rendezvous, to the end."""

import os
import re
import signal
import subprocess

import pytest


from harness import (CLEAN_JOB_ENV, DDP_EXAMPLE, PYTHON,
                     ddp_ranks, free_port, free_ports, pid_alive,
                     torch_available, wait_for)

WORKER = """\
import os, pathlib
out = pathlib.Path(os.environ["OUT_DIR"])
rank = os.environ["RANK"]
(out / ("rank" + rank)).write_text(os.environ["WORLD_SIZE"] + " " +
                                   os.environ["TORCHELASTIC_RESTART_COUNT"])
"""

# Not `exec`: the shell stays between the two agents, as in most images.
RUN_TRAIN = """\
#!/bin/sh
torchrun ${TRAIN_ARGS:-$(dirname "$0")/worker.py}
rc=$?
echo "run_train.sh: torchrun exited $rc"
exit $rc
"""


def pod_env(tmp_path, extra):
    env = dict(os.environ)
    for name in CLEAN_JOB_ENV:
        env.pop(name, None)
    env.update(extra)
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    env["OUT_DIR"] = str(tmp_path / "out")
    return env


@pytest.fixture
def image(tmp_path, agent):
    """A temporary "image": torchrun as a link to the agent on PATH, the
    wrapper script and its worker."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(agent, tmp_path / "bin" / "torchrun")
    (tmp_path / "worker.py").write_text(WORKER)
    script = tmp_path / "run_train.sh"
    script.write_text(RUN_TRAIN)
    script.chmod(0o755)
    return script


def start_pods(background, agent, tmp_path, script, nnodes,
               outer_flags=lambda i: (), extra_env=None):
    port = free_port()
    procs = []
    for i in range(2):
        env = pod_env(tmp_path, {
            "PET_NNODES": nnodes,
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}",
            "PET_RDZV_ID": "nest",
            "PET_NPROC_PER_NODE": "2",
            "PET_MAX_RESTARTS": "3",
            "PET_LOCAL_ADDR": f"127.0.0.{i + 1}",
            "DISTJOB_TERMINATION_LOG": str(tmp_path / f"termination-{i}"),
            **(extra_env or {}),
        })
        procs.append(background.start(
            [agent, "run", *outer_flags(i), "--", str(script)], env=env,
            cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    return procs


@pytest.mark.parametrize("nnodes", ["2", "1:2"])
def test_wrapper_script_runs_one_rendezvous(background, agent, tmp_path,
                                            image, nnodes):
    ports = free_ports(4)
    procs = start_pods(
        background, agent, tmp_path, image, nnodes,
        outer_flags=lambda i: [
            "--nproc-per-node", "1", "--health-port", str(ports[2 * i]),
            "--metrics-port", str(ports[2 * i + 1])])
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=60)[0])
        except subprocess.TimeoutExpired:
            pytest.fail("the nested job did not finish within 60 s (the "
                        "wrapper-script livelock)")
    for i, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, out[-4000:]
        # One rendezvous each: the outer's round 0 and the inner's round 0,
        # no membership change, no further round.
        rounds = re.findall(r"round (\d+) of 'nest': group rank", out)
        assert rounds == ["0", "0"], out[-4000:]
        assert "membership changed" not in out, out[-4000:]
        assert "steps aside" in out, out[-4000:]
        assert re.search(
            "it stepped aside and this launcher runs the job .*took over "
            "DISTJOB_HEALTH_PORT, DISTJOB_METRICS_PORT", out), out[-4000:]
        # The outer's flags, served by the outer, then by the inner.
        assert out.count(f"health server on port {ports[2 * i]}") == 2
        assert out.count(
            f"metrics and HTTP probes on port {ports[2 * i + 1]}") == 2
        assert "run_train.sh: torchrun exited 0" in out
        # The inner's message (it shares the path), then the outer's line.
        message = (tmp_path / f"termination-{i}").read_text().splitlines()
        assert message[0].startswith("distjob-agent: success exit_code=0")
        assert message[-1].startswith(
            "handed over to the launcher its worker started"), message
    # The inners' job: 2 nodes x 2 workers, each rank once, no restart.
    ranks = sorted(f.name for f in (tmp_path / "out").iterdir())
    assert ranks == ["rank0", "rank1", "rank2", "rank3"]
    for f in (tmp_path / "out").iterdir():
        assert f.read_text() == "4 0"


def test_outer_with_several_workers_refuses(background, agent, tmp_path,
                                            image):
    env = pod_env(tmp_path, {
        "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination")})
    proc = background.start(
        [agent, "run", "--standalone", "--nproc-per-node", "2", "--",
         str(image)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2, out[-4000:]
    assert re.search(
        r"distjob-agent run: this launcher \(distjob-agent run / torchrun\) "
        r"was started by a worker of the outer distjob-agent \(pid \d+, "
        r"running `\S*run_train.sh` with 2 worker\(s\) on this node\)", out), \
        out[-4000:]
    assert "--nproc-per-node 1" in out
    assert not any((tmp_path / "out").iterdir())  # no worker ran


def test_stale_marker_runs_top_level(agent, tmp_path, image):
    env = pod_env(tmp_path, {
        "DISTJOB_OUTER_AGENT": str(tmp_path / "gone" / "agent.sock"),
        "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination")})
    result = subprocess.run(
        [str(tmp_path / "bin" / "torchrun"), "--standalone",
         "--nproc-per-node", "1", str(tmp_path / "worker.py")], env=env,
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "DISTJOB_OUTER_AGENT names no running agent" in result.stderr
    assert (tmp_path / "out" / "rank0").read_text() == "1 0"


@pytest.mark.skipif(not torch_available(),
                    reason="Debian's python3-torch is not installed")
def test_wrapper_script_trains_ddp(background, agent, tmp_path, image):
    """The same nesting with real training: gloo DDP across the inner
    agents' 2 x 2 workers."""
    out_dir = tmp_path / "ddp"
    out_dir.mkdir()
    procs = start_pods(
        background, agent, tmp_path, image, "1:2",
        outer_flags=lambda i: ["--nproc-per-node", "1"],
        extra_env={"PYTHON_EXEC": PYTHON,
                   "TRAIN_ARGS": f"{DDP_EXAMPLE} --epochs 3 --out {out_dir}"})
    for p in procs:
        out = p.communicate(timeout=300)[0]
        assert p.returncode == 0, out[-4000:]
        assert re.findall(r"round (\d+) of 'nest': group rank", out) == \
            ["0", "0"], out[-4000:]
    ranks = ddp_ranks(out_dir, 4)
    assert ranks[0]["losses"][-1] < ranks[0]["losses"][0]


def test_stop_signal_reaches_the_inner_launcher(background, agent, tmp_path,
                                                image):
    """A handed-over outer still forwards signals: SIGTERM ends the inner
    job and both agents exit 143, leaving no process behind."""
    port = free_port()
    sleeper = tmp_path / "sleep.py"
    pid_file = tmp_path / "worker.pid"
    sleeper.write_text("import os, time, pathlib\n"
                       f"pathlib.Path({str(pid_file)!r}).write_text("
                       "str(os.getpid()))\ntime.sleep(120)\n")
    env = pod_env(tmp_path, {
        "PET_NNODES": "1", "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"127.0.0.1:{port}", "PET_RDZV_ID": "stop",
        "TRAIN_ARGS": str(sleeper),
        "DISTJOB_TERMINATION_LOG": str(tmp_path / "termination")})
    log = tmp_path / "outer.log"
    proc = background.start([agent, "run", "--nproc-per-node", "1", "--",
                             str(image)], env=env, cwd=tmp_path, log=log)
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), timeout=30,
             what="the inner agent's worker")
    worker = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143, log.read_text()[-4000:]
    assert "steps aside" in log.read_text()
    wait_for(lambda: not pid_alive(worker), timeout=10,
             what="the inner's worker gone")
