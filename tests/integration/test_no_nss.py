"""Names are the agent's to resolve, never glibc NSS's nor gRPC's.

Each agent runs in a mount namespace whose /etc/nsswitch.conf names a
module `broken` before `files`, whose system library folder holds only
deliberately broken files (FIFOs named libc.so.6, libnss_*.so.2: opening
one blocks, so a static binary that dlopen()s an NSS module hangs instead of
quietly falling back to the next module), and whose /etc/resolv.conf names
a DNS server that reads every query and never answers. The two nodes reach
each other by names that only /etc/hosts knows: a c10d rendezvous by those
names closes within a second of the agents' start. Both agents share one
network namespace, so their loopback addresses, ports and the silent DNS
server are the test's alone.
"""

import datetime
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from harness import wait_for

LIB = "/usr/lib/x86_64-linux-gnu"
# The store's name has only an IPv6 address, the nodes' only IPv4 ones:
# /etc/hosts answers AAAA as at once as A.
HOSTS = ("127.0.0.1 localhost\n"
         "::1 store.nss.test\n"
         "127.0.0.1 node0.nss.test\n"
         "127.0.0.2 node1.nss.test\n")
RESOLV = ("nameserver 127.0.0.53\n"
          "search nss.test\n"
          "options timeout:30 attempts:5\n")
NSSWITCH = "hosts: broken files dns\n"
PORT = 29400  # inside the test's own network namespace

# Binds the DNS port over UDP and TCP, then reads and drops queries.
SILENT_DNS = r"""
import pathlib, socket, sys
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.53", 53))
tcp = socket.socket()
tcp.bind(("127.0.0.53", 53))
tcp.listen(16)
pathlib.Path(sys.argv[1]).write_text("ready")
while True:
    udp.recvfrom(4096)
"""


def events(path):
    """{event: time} of the first of each event in an event-log file."""
    out = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        e = json.loads(line)
        t = datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ")
        out.setdefault(e["event"], t)
    return out


@pytest.fixture
def netns(tmp_path, background):
    """The pid of a process holding a fresh network namespace (loopback up)
    with the silent DNS server in it."""
    if subprocess.run(["unshare", "-n", "-m", "true"]).returncode != 0:
        pytest.skip("no network or mount namespaces here")
    if not os.path.exists("/etc/nsswitch.conf") or not os.path.isdir(LIB):
        pytest.skip(f"no /etc/nsswitch.conf or {LIB} to cover")
    ready = tmp_path / "dns-ready"
    proc = background.start(
        ["unshare", "-n", "sh", "-c",
         f'ip link set lo up && exec "$0" -c "$1" "$2"', sys.executable,
         SILENT_DNS, str(ready)],
        log=tmp_path / "dns.log")
    wait_for(lambda: ready.exists() or proc.poll() is not None, 10,
             what="the silent DNS server")
    assert proc.poll() is None, (tmp_path / "dns.log").read_text()
    return proc.pid


def broken_root(tmp_path):
    """The files bound over the image's: hosts, resolv.conf, nsswitch.conf
    and a library folder of FIFOs."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "hosts").write_text(HOSTS)
    (etc / "resolv.conf").write_text(RESOLV)
    (etc / "nsswitch.conf").write_text(NSSWITCH)
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("libc.so.6", "libnss_broken.so.2", "libnss_files.so.2",
                 "libnss_dns.so.2", "libresolv.so.2"):
        os.mkfifo(lib / name)
    return etc, lib


def test_hosts_names_rendezvous_at_once_without_nss(agent, tmp_path, netns,
                                                    background):
    # The worker must start with the library folder broken: static.
    busybox = shutil.which("busybox")
    if busybox is None:
        pytest.skip("busybox-static is not installed")
    etc, lib = broken_root(tmp_path)
    procs = []
    for i in range(2):
        conf = f"is_host={1 if i == 0 else 0},join_timeout=60"
        args = [agent, "run", "--nnodes", "2", "--nproc-per-node", "1",
                "--rdzv-backend", "c10d",
                "--rdzv-endpoint", f"store.nss.test:{PORT}",
                "--rdzv-id", "nss", "--rdzv-conf", conf,
                "--local-addr", f"node{i}.nss.test",
                "--event-log-handler", f"file:{tmp_path}/events{i}.jsonl",
                "--no-python", busybox, "true"]
        # The library folder is bound last: from there on only the static
        # agent and its static worker can start.
        script = (f"mount --bind {etc}/hosts /etc/hosts && "
                  f"mount --bind {etc}/resolv.conf /etc/resolv.conf && "
                  f"mount --bind {etc}/nsswitch.conf /etc/nsswitch.conf && "
                  f"mount --bind {lib} {LIB} && exec \"$@\"")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VC_", "PET_", "DISTJOB_"))}
        env["DISTJOB_TERMINATION_LOG"] = str(tmp_path / f"termination{i}")
        procs.append(background.start(
            ["nsenter", "-t", str(netns), "-n", "unshare", "-m",
             "sh", "-c", script, "sh"] + args,
            env=env, log=tmp_path / f"agent{i}.log"))

    def logs():
        return "\n".join((tmp_path / f"agent{i}.log").read_text()
                         for i in range(2))

    # The bound on the whole run is only a deadline for a broken build;
    # the claim is the one on the event-log timeline below.
    deadline = time.monotonic() + 30
    for p in procs:
        try:
            assert p.wait(max(1, deadline - time.monotonic())) == 0, logs()
        except subprocess.TimeoutExpired:
            pytest.fail(f"the job did not end within 30 s:\n{logs()}")
    for i in range(2):
        seen = events(pathlib.Path(tmp_path / f"events{i}.jsonl"))
        assert {"started", "round_closed"} <= seen.keys(), (seen, logs())
        took = (seen["round_closed"] - seen["started"]).total_seconds()
        assert took < 1.0, (i, took, logs())
