"""What only the etcd backend promises: the job survives the loss of an
etcd member, an unreachable cluster is a retryable exit that names the
endpoints, and a finished job leaves no keys behind, so a rerun with the
same --rdzv-id starts clean. The rest of the rendezvous behaviour is the
parameterised suite in test_rendezvous.py."""

import os
import signal
import subprocess
import time

import pytest


from etcd_cluster import etcd_cluster, own_etcd_cluster  # noqa: F401
from harness import FAST, Job, free_ports, log_time, wait_for


@pytest.fixture
def etcd_job(agent, tmp_path):
    jobs = []

    def make(cluster, **kw):
        j = Job(agent, tmp_path, backend="etcd", etcd=cluster, **kw)
        jobs.append(j)
        return j
    yield make
    for j in jobs:
        j.cleanup()


def test_losing_an_etcd_member_loses_nothing(etcd_job, own_etcd_cluster):
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2:3", conf=FAST + ",last_call_timeout=1")
    for i in range(2):
        job.start(i)
    first = job.wait_round(["node0", "node1"])
    # Member 0 is the first endpoint every agent talks to.
    cluster.kill(0)
    # The store still takes writes and wakes watchers: a third node joins
    # and the round re-forms without anyone being declared lost.
    job.start(2)
    recs = job.wait_round(["node0", "node1", "node2"], timeout=60)
    assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {"0"}
    for n in ("node0", "node1"):
        assert recs[(n, "0")]["GROUP_RANK"] == first[(n, "0")]["GROUP_RANK"]
    assert "lost" not in job.log(0) + job.log(1)
    job.go()
    for i in range(3):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_losing_the_first_agent_is_a_peer_loss(etcd_job, etcd_cluster):
    job = etcd_job(etcd_cluster, nnodes="2:3",
                   conf=FAST + ",last_call_timeout=0.5")
    for i in range(3):
        job.start(i)
    job.wait_round(["node0", "node1", "node2"])
    job.kill9(0)
    recs = job.wait_round(["node1", "node2"], timeout=20)
    assert sorted(r["GROUP_RANK"] for r in recs.values()) == ["0", "1"]
    job.go()
    for i in (1, 2):
        assert job.procs[i].wait(60) == 0, job.log(i)


def test_unreachable_cluster_is_retryable_and_names_endpoints(agent,
                                                              tmp_path):
    endpoints = "127.0.0.1:9,127.0.0.1:11"
    r = subprocess.run(
        [agent, "run", "--nnodes", "1", "--rdzv-backend", "etcd",
         "--rdzv-endpoint", endpoints, "--rdzv-id", "gone",
         "--rdzv-conf", "join_timeout=2,read_timeout=1",
         "--no-python", "true"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, DISTJOB_TERMINATION_LOG=str(tmp_path / "t")))
    assert r.returncode == 138, r.stdout + r.stderr
    assert endpoints in r.stdout + r.stderr


def test_rerun_with_the_same_id_starts_clean(etcd_job, etcd_cluster):
    job = etcd_job(etcd_cluster, nnodes="2", conf=FAST)
    prefix = f"/{job.dir.name}/"
    for attempt in range(2):
        # Same id, same prefix, fresh agents; the workers finish at once.
        job.out = job.dir / f"out{attempt}"
        job.out.mkdir()
        job.go()
        for i in range(2):
            job.start(i)
        for i in range(2):
            assert job.procs[i].wait(60) == 0, job.log(i)
        recs = job.latest()
        assert len(recs) == 2
        # Round 0 again: nothing of the first run was left to resume.
        assert {r["TORCHELASTIC_RESTART_COUNT"] for r in recs.values()} == {
            "0"}
        # Both agents left: their leases are revoked, no key remains.
        assert etcd_cluster.keys(prefix) == [], job.log(0)


def _make_certs(d):
    """A throw-away CA, a server certificate for 127.0.0.1 and a client
    certificate, with the openssl CLI."""
    def ssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        "-subj", "/CN=test-ca", "-keyout", str(d / "ca.key"),
        "-out", str(d / "ca.pem"))
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"),
                      ("client", "extendedKeyUsage=clientAuth")):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
        (d / f"{name}.ext").write_text(ext + "\n")
        ssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA",
            str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
            "-CAcreateserial", "-days", "1",
            "-extfile", str(d / f"{name}.ext"), "-out", str(d / f"{name}.pem"))


def test_tls_with_client_certificates(agent, tmp_path):
    if not os.access("/usr/bin/etcd", os.X_OK):
        pytest.skip("etcd-server is not installed")
    _make_certs(tmp_path)
    client, peer = free_ports(2)
    url = f"https://127.0.0.1:{client}"
    purl = f"http://127.0.0.1:{peer}"
    etcd = subprocess.Popen(
        ["/usr/bin/etcd", "--name", "tls", "--data-dir",
         str(tmp_path / "data"), "--listen-client-urls", url,
         "--advertise-client-urls", url, "--listen-peer-urls", purl,
         "--initial-advertise-peer-urls", purl,
         "--initial-cluster", f"tls={purl}",
         "--cert-file", str(tmp_path / "server.pem"),
         "--key-file", str(tmp_path / "server.key"),
         "--client-cert-auth", "--trusted-ca-file", str(tmp_path / "ca.pem")],
        stdout=open(tmp_path / "etcd.log", "w"), stderr=subprocess.STDOUT)
    try:
        tls = (f"ca_cert={tmp_path / 'ca.pem'},"
               f"cert={tmp_path / 'client.pem'},"
               f"key={tmp_path / 'client.key'}")

        def run(conf):
            return subprocess.run(
                [agent, "run", "--nnodes", "1", "--rdzv-backend", "etcd",
                 "--rdzv-endpoint", f"127.0.0.1:{client}", "--rdzv-id", "tls",
                 "--rdzv-conf", conf, "--no-python", "true"],
                capture_output=True, text=True, timeout=60,
                env=dict(os.environ,
                         DISTJOB_TERMINATION_LOG=str(tmp_path / "t")))
        def healthy():
            return subprocess.run(
                ["/usr/bin/etcdctl", "--endpoints", url, "--cacert",
                 str(tmp_path / "ca.pem"), "--cert",
                 str(tmp_path / "client.pem"), "--key",
                 str(tmp_path / "client.key"), "endpoint", "health"],
                capture_output=True,
                env=dict(os.environ, ETCDCTL_API="3")).returncode == 0
        wait_for(healthy, 60, interval=0.2, what="etcd with TLS")
        ok = run(tls + ",join_timeout=30,read_timeout=5")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        # Without a client certificate the server refuses the agent.
        no_cert = run(f"ca_cert={tmp_path / 'ca.pem'},join_timeout=3,"
                      "read_timeout=1")
        assert no_cert.returncode == 138, no_cert.stdout + no_cert.stderr
    finally:
        etcd.kill()
        etcd.wait(10)


def test_losing_the_whole_cluster_is_a_retryable_exit(etcd_job,
                                                      own_etcd_cluster):
    # A watch that no member holds is an error, not "no change": the
    # monitor reports etcd lost after read_timeout, while the workers run.
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2",
                   conf="keep_alive_interval=0.5,read_timeout=3")
    for i in range(2):
        job.start(i)
    job.wait_round(["node0", "node1"])
    killed = time.monotonic()
    cluster.stop()
    for i in range(2):
        rc = job.procs[i].wait(30)
        # read_timeout (3 s), at most one watch (a lease) and slack.
        assert time.monotonic() - killed < 3 + 1.5 + 3.5, job.log(i)
        assert rc == 138, job.log(i)
        assert "unreachable" in job.log(i), job.log(i)
        assert cluster.endpoints in job.log(i), job.log(i)



def freeze(cluster):
    """SIGSTOP every member: TCP still accepts, nothing answers (a hung
    etcd, not a lost one). thaw() before the cluster is killed."""
    for p in cluster.procs.values():
        p.send_signal(signal.SIGSTOP)


def thaw(cluster):
    for p in cluster.procs.values():
        p.send_signal(signal.SIGCONT)


def span(log, first, last):
    """Seconds between two of the agent's own log lines."""
    return log_time(log, last) - log_time(log, first)


def exit_line(job, i):
    """The agent's last line, which it writes as it exits."""
    return job.log(i).strip().splitlines()[-1]


HUNG_CONF = "keep_alive_interval=0.5,read_timeout=3"


def test_hung_etcd_during_training_is_a_lost_etcd(etcd_job,
                                                  own_etcd_cluster):
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2", conf=HUNG_CONF)
    for i in range(2):
        job.start(i)
    job.wait_round(["node0", "node1"])
    freeze(cluster)
    try:
        for i in range(2):
            assert job.procs[i].wait(60) == 138, job.log(i)
            log = job.log(i)
            # The lease renewal that began before the freeze (one interval
            # at most) and found no answer within read_timeout: the store
            # is lost, the workers stopped, and the agent out within 1 s.
            lost = span(log, "runs [", "rendezvous membership changed")
            assert lost < 0.5 + 3 + 1, log
            assert span(log, "rendezvous membership changed",
                        exit_line(job, i)) < 1, log
            assert "138" in (job.dir / f"t{i}").read_text(), log
    finally:
        thaw(cluster)


def test_hung_etcd_in_the_exit_barrier_ends_it(etcd_job, own_etcd_cluster):
    # node0's worker succeeds at once; node1's trains on. etcd hangs while
    # node0 waits in its exit barrier (300 s by default).
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2", conf=HUNG_CONF)
    for i in range(2):
        job.start(i, env={"TEST_FAIL_ONCE": "node0", "TEST_FAIL_CODE": "0"})
    wait_for(lambda: "exit barrier of round" in job.log(0), 60,
             what="node0 in its exit barrier")
    freeze(cluster)
    try:
        # Its workers succeeded: the barrier is given up, not the job.
        assert job.procs[0].wait(60) == 0, job.log(0)
        assert span(job.log(0), "exit barrier of round",
                    exit_line(job, 0)) < 3 + 1 + 1, job.log(0)
        assert job.procs[1].wait(60) == 138, job.log(1)
    finally:
        thaw(cluster)


def test_stop_signal_with_etcd_hung_ends_within_a_second(etcd_job,
                                                         own_etcd_cluster):
    # Default read_timeout (60 s): nothing may wait for etcd's answer.
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2", conf="keep_alive_interval=0.5")
    for i in range(2):
        job.start(i)
    job.wait_round(["node0", "node1"])
    freeze(cluster)
    try:
        job.procs[0].send_signal(signal.SIGTERM)
        assert job.procs[0].wait(60) == 128 + signal.SIGTERM, job.log(0)
        log = job.log(0)
        # The worker stops at once on SIGTERM; the agent is out within a
        # second of it (the 0.5 s its goodbyes to etcd may take, once the
        # stop's 0.5 s grace for the rendezvous passed), message written.
        assert span(log, "received SIGTERM", exit_line(job, 0)) < 1 + 0.3, log
        assert "143" in (job.dir / "t0").read_text(), log
    finally:
        thaw(cluster)


def test_hung_etcd_while_joining_keeps_join_timeout(etcd_job,
                                                    own_etcd_cluster):
    cluster = own_etcd_cluster
    job = etcd_job(cluster, nnodes="2", conf=HUNG_CONF + ",join_timeout=5")
    job.start(0)  # its peer never comes
    wait_for(lambda: "waiting for nodes to join" in job.log(0), 30,
             what="the agent waiting for its peer")
    freeze(cluster)
    try:
        assert job.procs[0].wait(60) == 138, job.log(0)
        log = job.log(0)
        # join_timeout from the start of the rendezvous, and the agent out
        # within a second of it.
        assert span(log, "rendezvous over etcd", exit_line(job, 0)) < 5 + 1, (
            log)
    finally:
        thaw(cluster)
