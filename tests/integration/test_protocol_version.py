"""A rendezvous of mixed protocol versions is refused up front.

The joiner is agent:distjob-agent-protocol-next, a testonly twin of the
agent whose rendezvous protocol version is one past the shipped one (a
link-time definition, agent/protocol_next.cc): the shipped binary has no
flag or variable that changes its version, so nothing set by accident in a
pod can make one agent speak another protocol. The first agent records
its version in the store; the twin must exit 2 naming both versions, on
the embedded gRPC store and on etcd, before it joins a round."""

import os
import subprocess

import pytest


from etcd_cluster import etcd_cluster  # noqa: F401
from harness import ROOT, Background, free_port, wait_for

TWIN = os.environ.get(
    "DISTJOB_AGENT_PROTOCOL_NEXT",
    str(ROOT / "bazel-bin" / "agent" / "distjob-agent-protocol-next"))


@pytest.fixture(scope="module")
def twin():
    if not os.access(TWIN, os.X_OK):
        pytest.fail(f"{TWIN} is not built: run `bazel build "
                    "//agent:distjob-agent-protocol-next`")
    return TWIN


def versions(binary):
    out = subprocess.run([binary, "--version"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    line = next(x for x in out.splitlines()
                if x.startswith("rendezvous protocol: "))
    return int(line.split()[2])


@pytest.mark.parametrize("backend", ["c10d", "etcd"])
def test_a_joiner_of_another_protocol_exits_2_naming_both(
        agent, twin, tmp_path, backend, request):
    mine, theirs = versions(agent), versions(twin)
    assert theirs == mine + 1
    if backend == "etcd":
        cluster = request.getfixturevalue("etcd_cluster")
        endpoint = cluster.endpoints
        extra = f",etcd_prefix=/{tmp_path.name}"
    else:
        endpoint = f"127.0.0.1:{free_port()}"
        extra = ""

    def argv(binary, i):
        conf = f"is_host={1 if i == 0 else 0},join_timeout=30" + extra
        return [binary, "run", "--nnodes", "2", "--rdzv-backend", backend,
                "--rdzv-endpoint", endpoint, "--rdzv-id", "mixed",
                "--rdzv-conf", conf, "--local-addr", f"127.0.0.{i + 1}",
                "--no-python", "true"]

    env = dict(os.environ)
    with Background() as bg:
        host_log = tmp_path / "host.log"
        host = bg.start(argv(agent, 0),
                        env=dict(env, DISTJOB_TERMINATION_LOG=str(
                            tmp_path / "t0")), log=host_log)
        # The first agent has recorded its version once it waits for the
        # second node.
        wait_for(lambda: host.poll() is not None
                 or "waiting for nodes to join" in host_log.read_text(),
                 30, interval=0.05, what="the first agent's wait for its peer")
        assert host.poll() is None, host_log.read_text()
        joiner = subprocess.run(
            argv(twin, 1), capture_output=True, text=True, timeout=60,
            env=dict(env, DISTJOB_TERMINATION_LOG=str(tmp_path / "t1")))
        assert joiner.returncode == 2, joiner.stderr
        assert (f"speaks rendezvous protocol version {mine}; this agent "
                f"speaks version {theirs}") in joiner.stderr
        assert f"version {theirs}" in (tmp_path / "t1").read_text()
        # The host never saw the twin join: it still waits for a peer.
        assert host.poll() is None, host_log.read_text()
