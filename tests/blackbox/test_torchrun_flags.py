"""Current torchrun's command-line conventions beyond 1.13: argparse's
unique-prefix abbreviations, and the flags added since."""

import re
import subprocess

import pytest

from harness import PYTHON


def test_every_flag_of_pythons_torchrun_is_the_agents(run_agent):
    # The torchrun of PYTHON's PyTorch: 1.13's here, 2.x's where
    # tests/device/check.sh runs this file.
    help_text = subprocess.run([PYTHON, "-m", "torch.distributed.run",
                                "--help"], capture_output=True, text=True)
    if help_text.returncode != 0:
        pytest.skip("PYTHON has no torch.distributed.run")
    # Only the option entries' own spellings, not flags named in prose.
    theirs = {flag for entry in re.findall(r"^  (-.*?)(?:  |$)",
                                           help_text.stdout, re.M)
              for flag in re.findall(r"--[a-z][a-z0-9_-]*", entry)}
    theirs.discard("--help")
    ours = run_agent(["completion", "bash"], timeout=10)
    assert ours.returncode == 0, ours.stderr
    known = set(re.findall(r"--[a-z][a-z0-9_-]*", ours.stdout))
    assert len(theirs) > 15, help_text.stdout  # not a parse of nothing
    assert not theirs - known, sorted(theirs - known)


def test_unique_prefix_is_the_flag(run_agent):
    for args in (["--nproc", "2"], ["--nproc=2"], ["--nproc_per=2"]):
        r = run_agent(["run", *args, "--", "sh", "-c",
                       "echo $LOCAL_WORLD_SIZE"])
        assert r.returncode == 0, r.stderr
        assert r.stdout == "2\n2\n", args


def test_ambiguous_prefix_exits_2_listing_candidates(run_agent):
    r = run_agent(["run", "--rdzv", "x", "--", "true"])
    assert r.returncode == 2
    assert "ambiguous option '--rdzv' could match" in r.stderr
    assert "--rdzv-backend" in r.stderr and "--rdzv-endpoint" in r.stderr


def test_workers_see_the_signals_to_handle(run_agent):
    # 2.x torchrun exports its --signals-to-handle (as given) to the workers.
    show = ["--", "sh", "-c", "echo $TORCHELASTIC_SIGNALS_TO_HANDLE"]
    for args, env, want in (
            ([], None, "SIGTERM,SIGINT,SIGHUP,SIGQUIT"),
            (["--signals-to-handle", "SIGTERM,SIGUSR1"], None,
             "SIGTERM,SIGUSR1"),
            ([], {"PET_SIGNALS_TO_HANDLE": "SIGUSR2"}, "SIGUSR2"),
            ([], {"TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGINT"},
             "SIGTERM,SIGINT,SIGHUP,SIGQUIT")):
        r = run_agent(["run", *args, *show], env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout == want + "\n", (args, env)


def test_nproc_xpu_is_a_device_type(run_agent):
    # This machine has no Intel GPU: the value is understood and counted.
    r = run_agent(["run", "--nproc-per-node", "xpu", "--", "true"],
                  env={"ZE_AFFINITY_MASK": None})
    assert r.returncode == 2
    assert "--nproc-per-node xpu: no Intel GPU is visible" in r.stderr


def test_virtual_local_rank(run_agent):
    r = run_agent(["run", "--nproc-per-node", "2", "--", "sh", "-c",
                   "echo $RANK:$LOCAL_RANK:$CUDA_VISIBLE_DEVICES"],
                  env={"PET_VIRTUAL_LOCAL_RANK": "1",
                       "CUDA_VISIBLE_DEVICES": "3,5"})
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["0:0:3", "1:0:5"]


def _cpus(text):
    cpus = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_numa_binding_exclusive_gives_disjoint_cpus(run_agent):
    import pathlib
    import pytest
    nodes = sorted(pathlib.Path("/sys/devices/system/node").glob("node[0-9]*"))
    if not nodes or len(_cpus((nodes[0] / "cpulist").read_text())) < 2:
        pytest.skip("needs sysfs NUMA information and 2 CPUs on node 0")
    r = run_agent(["run", "--numa-binding", "exclusive", "--nproc", "2",
                   "--", "sh", "-c",
                   "echo $LOCAL_RANK $(grep Cpus_allowed_list: "
                   "/proc/self/status | cut -f2)"])
    assert r.returncode == 0, r.stderr
    got = dict(line.split() for line in r.stdout.splitlines())
    a, b = _cpus(got["0"]), _cpus(got["1"])
    assert a and b and not (a & b), r.stdout
    # Both ranks (no GPU: spread over the nodes) stay inside NUMA nodes.
    assert a | b <= {c for n in nodes for c in _cpus((n / "cpulist")
                                                     .read_text())}


def test_numa_binding_bad_value_exits_2(run_agent):
    r = run_agent(["run", "--numa-binding", "nodes", "--", "true"])
    assert r.returncode == 2
    assert "--numa-binding" in r.stderr and "core-complex" in r.stderr
