"""A real etcd cluster (Debian's etcd-server) on loopback for the etcd
rendezvous backend's tests: N members on free ports with throw-away data
dirs, killed whatever happens."""

import os
import subprocess
import uuid

import pytest


from harness import free_ports, wait_for

ETCD = "/usr/bin/etcd"
ETCDCTL = "/usr/bin/etcdctl"


class EtcdCluster:
    def __init__(self, directory, members=3):
        self.dir = directory
        ports = free_ports(2 * members)
        self.client_ports = ports[:members]
        self.peer_ports = ports[members:]
        self.names = [f"m{i}" for i in range(members)]
        self.procs = {}
        self.token = uuid.uuid4().hex
        self.initial = ",".join(
            f"{n}=http://127.0.0.1:{p}"
            for n, p in zip(self.names, self.peer_ports))

    @property
    def endpoints(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def endpoint(self, i):
        return f"127.0.0.1:{self.client_ports[i]}"

    def start(self, i):
        curl = f"http://{self.endpoint(i)}"
        purl = f"http://127.0.0.1:{self.peer_ports[i]}"
        log = open(self.dir / f"etcd-{i}.log", "a")
        self.procs[i] = subprocess.Popen(
            [ETCD, "--name", self.names[i],
             "--data-dir", str(self.dir / f"etcd-{i}.data"),
             "--listen-client-urls", curl, "--advertise-client-urls", curl,
             "--listen-peer-urls", purl,
             "--initial-advertise-peer-urls", purl,
             "--initial-cluster", self.initial,
             "--initial-cluster-token", self.token,
             "--initial-cluster-state", "new"],
            stdout=log, stderr=subprocess.STDOUT)

    def healthy(self, members=None):
        members = range(len(self.names)) if members is None else members
        eps = ",".join(self.endpoint(i) for i in members)
        r = subprocess.run([ETCDCTL, "--endpoints", eps, "--dial-timeout=1s",
                            "--command-timeout=2s", "endpoint", "health"],
                           capture_output=True, text=True,
                           env=dict(os.environ, ETCDCTL_API="3"))
        return r.returncode == 0

    def start_all(self, timeout=60):
        for i in range(len(self.names)):
            self.start(i)
        wait_for(self.healthy, timeout, interval=0.2,
                 what=f"etcd cluster {self.endpoints}")

    def kill(self, i):
        p = self.procs.pop(i)
        p.kill()
        p.wait(10)

    def keys(self, prefix):
        r = subprocess.run([ETCDCTL, "--endpoints", self.endpoints,
                            "get", "--prefix", "--keys-only", prefix],
                           capture_output=True, text=True, check=True,
                           env=dict(os.environ, ETCDCTL_API="3"))
        return [k for k in r.stdout.splitlines() if k]

    def stop(self):
        for i in list(self.procs):
            self.kill(i)


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory):
    """One 3-member cluster shared by a session's tests; each test keeps to
    its own key prefix."""
    if not os.access(ETCD, os.X_OK):
        pytest.skip("etcd-server is not installed")
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"))
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def own_etcd_cluster(tmp_path):
    """A cluster for a test that kills members."""
    if not os.access(ETCD, os.X_OK):
        pytest.skip("etcd-server is not installed")
    cluster = EtcdCluster(tmp_path)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()
