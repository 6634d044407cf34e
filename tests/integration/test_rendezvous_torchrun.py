"""The same two-node c10d job launched by torchrun and by the agent gives
the workers the same environment: every variable torchrun sets (ports, ids
and host names aside). torchrun is the one of PYTHON's PyTorch: Debian's
1.13 here, 2.x where tests/device/check.sh runs this file."""

import json
import os
import subprocess
import textwrap

import pytest


from harness import PYTHON, free_port, kill_tree

NAMES = ["LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME",
         "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE",
         "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
         "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
         "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"]
VARYING = {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
           "TORCHELASTIC_ERROR_FILE"}

# Records the worker's whole environment: what torchrun adds beyond NAMES
# is found by comparing with the test's own.
WORKER = textwrap.dedent("""
    import json, os, sys
    with open(os.path.join(sys.argv[1], os.environ["RANK"]), "w") as f:
        json.dump(dict(os.environ), f)
""")


def has_torchrun():
    return subprocess.run([PYTHON, "-c", "import torch.distributed.run"],
                          capture_output=True).returncode == 0


def torch_major():
    return int(subprocess.run(
        [PYTHON, "-c", "import torch; print(torch.__version__)"],
        capture_output=True, text=True).stdout.split(".")[0])


def launch(cmds, timeout=180):
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, **e)) for c, e in cmds]
    try:
        outs = [p.communicate(timeout=timeout)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), outs
    finally:
        for p in procs:
            kill_tree(p)


def records(d):
    return {int(f): json.loads((d / f).read_text()) for f in os.listdir(d)}


@pytest.mark.skipif(not has_torchrun(), reason="no Debian python3-torch")
def test_same_worker_env_as_torchrun(agent, tmp_path):
    (tmp_path / "w.py").write_text(WORKER)
    results = {}
    major = torch_major()
    for who in ("torchrun", "agent"):
        out = tmp_path / who
        out.mkdir()
        port = free_port()
        cmds = []
        for i in range(2):
            common = ["--nnodes", "2", "--nproc_per_node", "2",
                      "--rdzv_backend", "c10d",
                      "--rdzv_endpoint", f"127.0.0.1:{port}",
                      "--rdzv_id", "cmp", "--max_restarts", "1"]
            env = {"DISTJOB_TERMINATION_LOG": str(tmp_path / f"t{who}{i}")}
            if major < 2:
                # 1.13's contract: worker rank 0 hosts the workers' store;
                # 2.x torchrun's agent serves it, as the agent does.
                env["DISTJOB_WORKER_STORE"] = "worker"
            if who == "torchrun":
                cmd = [PYTHON, "-m", "torch.distributed.run", *common,
                       "--rdzv_conf", f"is_host={i == 0}",
                       "-r", "1", "-t", "1",
                       str(tmp_path / "w.py"), str(out)]
            else:
                cmd = [agent, "run", *common, "--rdzv_conf",
                       f"is_host={1 if i == 0 else 0}",
                       "--local-addr", f"127.0.0.{i + 1}",
                       "--no-python",
                       PYTHON, str(tmp_path / "w.py"), str(out)]
            cmds.append((cmd, env))
        launch(cmds)
        results[who] = records(out)
    assert sorted(results["torchrun"]) == sorted(results["agent"]) == [
        0, 1, 2, 3]
    for rank in range(4):
        t, a = results["torchrun"][rank], results["agent"][rank]
        # What torchrun set or changed, over the environment both started
        # from (less what this test gave each launcher); the names of the
        # contract always.
        added = {n for n in t if os.environ.get(n) != t[n]} - {
            "DISTJOB_TERMINATION_LOG", "DISTJOB_WORKER_STORE"} | set(NAMES)
        # TORCHELASTIC_ERROR_FILE comes with the error-file reporting
        # (the supervisor's work), not with the rendezvous.
        missing = {n for n in added if n in t} - set(a) - {
            "TORCHELASTIC_ERROR_FILE"}
        assert not missing, (rank, missing)
        for n in sorted(added):
            if n in VARYING or n == "GROUP_RANK" or n not in t:
                continue
            assert a[n] == t[n], (rank, n, a[n], t[n])
        assert {n for n in NAMES if n in t} >= set(NAMES) - {
            "TORCHELASTIC_ERROR_FILE", "OMP_NUM_THREADS"}, sorted(t)
    # Within one job, MASTER_ADDR/PORT agree across all ranks.
    for who in results:
        assert len({(r["MASTER_ADDR"], r["MASTER_PORT"])
                    for r in results[who].values()}) == 1
        want = "True" if major >= 2 else "False"
        assert {r["TORCHELASTIC_USE_AGENT_STORE"]
                for r in results[who].values()} == {want}
