"""The open-file limit: the agent raises its soft limit to the hard one at
start (its workers inherit it), and each store's connection cap is what
that limit leaves after the other store's need for the job's declared
size. A cut is said once, at info; it is a warning, naming the numbers,
only when it leaves fewer connections than the job needs (README,
*Limits*). A job declared beyond the workers' store's default caps grows
them: its ranks are admitted without flags."""

import json
import re
import resource
import subprocess

import pytest

from harness import (RANK_SIM, accepting, free_port, raise_fd_limit,
                     wait_for)

HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def under_nofile(soft, hard):
    """A preexec_fn that starts the agent under these limits (lowering is
    always allowed); skips the test where the hard limit is already lower
    than `hard`."""
    if HARD != resource.RLIM_INFINITY and HARD < hard:
        pytest.skip(f"the hard open-file limit is {HARD}, under {hard}")
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def warnings_about_caps(log):
    return [line for line in log.splitlines()
            if " warning]" in line and ("cut to" in line
                                        or "open-file" in line)]


# The worker's own open-file limits, as torchrun's workers would read them.
SOFT_LIMIT = ["sh", "-c", "ulimit -Sn > \"$0\"/soft.$LOCAL_RANK"]


@pytest.mark.parametrize("hard", [20000, 8192])
def test_a_one_worker_job_logs_no_cap_warning(run_agent, tmp_path, hard):
    # Halving 20,000 between two stores cut the workers' store's 16,384 to
    # 9,872 with a warning on every start; one worker needs two.
    r = run_agent(["run", "--standalone", "--nproc-per-node", "1", "--"]
                  + SOFT_LIMIT + [str(tmp_path)],
                  preexec_fn=under_nofile(1024, hard))
    assert r.returncode == 0, r.stderr
    assert warnings_about_caps(r.stderr) == [], r.stderr
    cut = re.findall(r"info\] tcpstore: max_connections=16384 cut to (\d+)",
                     r.stderr)
    if hard >= 16384 + 256:
        assert cut == [], r.stderr
    else:
        # What the limit leaves after the agent's own 256, said once.
        assert cut == [str(hard - 256)], r.stderr
    # Raised to the hard limit, for the agent and its workers.
    assert (f"open-file limit raised from 1024 to its hard limit {hard}"
            in r.stderr), r.stderr
    assert (tmp_path / "soft.0").read_text().strip() == str(hard)


# A job whose declared size needs more of a store than it may hold: the
# agent's args ({port}: a free one), its open-file limit, the log line's
# mark, and what that line must say.
CAPS_BELOW_THE_JOB = [
    # 2,000 static nodes of one rank: node 0's store needs 4,000
    # connections (a 1.13 rank opens two); 2,048 descriptors hold 1,792.
    pytest.param(
        ["--nnodes", "2000", "--node-rank", "0", "--nproc-per-node", "1",
         "--master-addr", "127.0.0.1", "--master-port", "{port}"],
        2048, "tcpstore: max_connections=",
        [" warning] tcpstore: max_connections=16384 cut to 1792 ",
         "the 4000 connection(s) this job's declared size needs",
         "(ulimit -n) by at least 2208"],
        id="workers-store-cut"),
    # 5,000 nodes: the c10d host's store needs 5,000 connections, beyond
    # its store_max_conns of 4,096 though the limit would hold them.
    pytest.param(
        ["--nnodes", "1:5000", "--nproc-per-node", "1", "--rdzv-backend",
         "c10d", "--rdzv-endpoint", "127.0.0.1:{port}", "--rdzv-id", "big"],
        20000, "store_max_conns=",
        [" warning] rendezvous store: store_max_conns=4096 is below the "
         "5000 connection(s) this job's declared size needs: "
         "connections past 4096 are refused"],
        id="rendezvous-store-uncut"),
]


@pytest.mark.parametrize("flags, nofile, mark, says", CAPS_BELOW_THE_JOB)
def test_a_store_cap_below_the_jobs_need_warns_naming_it(
        start_agent, tmp_path, flags, nofile, mark, says):
    port = free_port()
    log = tmp_path / "agent.log"
    agent = start_agent(
        ["run"] + [f.format(port=port) for f in flags]
        + ["--", "sleep", "60"],
        log=log, preexec_fn=under_nofile(nofile, nofile))
    line = wait_for(
        lambda: next((x for x in log.read_text().splitlines()
                      if mark in x), None),
        timeout=30, what=f"the line with {mark!r}")
    assert agent.poll() is None
    for text in says:
        assert text in line, line


def start_static_node0(start_agent, tmp_path, nodes):
    """Node 0 of `nodes` static one-rank nodes under a 20,000-descriptor
    open-file limit, waiting for the others: (its Popen, its store's port,
    its log's path)."""
    port = free_port()
    log = tmp_path / "agent.log"
    agent = start_agent(
        ["run", "--nnodes", str(nodes), "--node-rank", "0",
         "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
         "--master-port", str(port), "--", "sleep", "60"],
        log=log, preexec_fn=under_nofile(20000, 20000))
    return agent, port, log


# Node 0 of 9,000 static one-rank nodes serves the store that the static
# rendezvous and the workers share: the job's declared size needs 18,000
# connections (a 1.13 rank opens two), beyond the default 16,384, and the
# 20,000 descriptors hold them. 17,000 simulated ranks (bench/rank_sim, a
# connection each) all pass a barrier through it while node 0 still waits
# for the other nodes. At the default cap (the agent before) the simulator
# failed.
def test_the_workers_store_grows_with_the_jobs_declared_size(
        start_agent, tmp_path):
    ranks = 17000
    raise_fd_limit(ranks + 512)  # the simulator's, inherited
    agent, port, log = start_static_node0(start_agent, tmp_path, 9000)
    wait_for(lambda: accepting(port), timeout=30, what="node 0's store")
    sim = subprocess.run(
        [RANK_SIM, "--port", str(port), "--ranks", str(ranks), "--pattern",
         "barrier", "--timeout-s", "60", "--prefix", "grown/"],
        capture_output=True, text=True, timeout=120)
    assert sim.returncode == 0, sim.stderr
    report = json.loads(sim.stdout.splitlines()[0])
    assert report["connected"] == ranks, report
    assert report["passed"] == ranks, report
    assert agent.poll() is None
    text = log.read_text()
    assert warnings_about_caps(text) == [], text
    assert "tcpstore: caps grown for 18000 connections" in text, text


# The memory caps grow for what the open-file limit lets in, not for the
# declared size alone: 20,000 static one-rank nodes declare 40,000
# connections, and 20,000 descriptors hold 19,744 after the agent's 256.
# Each of the 3,360 past the default adds a wait and 5 KiB of buffers.
def test_the_grown_caps_follow_the_open_file_limit(start_agent, tmp_path):
    agent, _, log = start_static_node0(start_agent, tmp_path, 20000)
    line = wait_for(
        lambda: next((x for x in log.read_text().splitlines()
                      if "caps grown for" in x), None),
        timeout=30, what="the grown caps' line")
    extra = 19744 - 16384
    assert " info] tcpstore: caps grown for 19744 connections" in line, line
    assert f"max_waiters={100000 + extra} " in line, line
    assert f"max_buffered_bytes={(256 << 20) + extra * 5120}" in line, line
    # The cut below the job's need is still the one warning, naming both.
    assert ("tcpstore: max_connections=40000 cut to 19744"
            in log.read_text()), log.read_text()
    assert agent.poll() is None
