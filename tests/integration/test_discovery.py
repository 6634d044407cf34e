"""Peer discovery against a real DNS server: dnsmasq on loopback serves a
4-pod job's headless-service records, and each "pod" (its own --hostname,
the agent pointed at dnsmasq with --dns-server) runs `distjob-agent env
--json`. Records can arrive late (hosts file rewritten + SIGHUP) or never."""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading

import pytest

from harness import wait_for

pytestmark = pytest.mark.skipif(shutil.which("dnsmasq") is None,
                                reason="dnsmasq is not installed")

JOB = "dj"
REPLICAS = "ps=1,worker=3"
PODS = [("ps", 0), ("worker", 0), ("worker", 1), ("worker", 2)]


def host(task, index):
    return f"{JOB}-{task}-{index}.ns.svc"


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_hosts(path, pods):
    lines = [f"127.0.1.{i + 1} {host(t, n)}" for i, (t, n) in enumerate(pods)]
    # An AAAA-only peer is as good as an A one.
    lines.append(f"fd00::1 {JOB}-v6-0.ns.svc")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, path)


@pytest.fixture
def dns(tmp_path):
    hosts = tmp_path / "hosts"
    write_hosts(hosts, [])
    port = free_udp_port()
    proc = subprocess.Popen(
        ["dnsmasq", "--keep-in-foreground", f"--port={port}",
         "--listen-address=127.0.0.1", "--bind-interfaces", "--no-resolv",
         "--no-hosts", "--no-negcache", f"--addn-hosts={hosts}",
         "--user=root", "--pid-file=", "--log-facility=-"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def listening():
            if proc.poll() is not None:
                raise RuntimeError(f"dnsmasq exited: {proc.stderr.read()}")
            out = subprocess.run(["ss", "-Hlun", f"sport = :{port}"],
                                 capture_output=True, text=True).stdout
            return out.strip() != ""
        wait_for(listening, 10, what="dnsmasq listening")

        class Dns:
            server = f"127.0.0.1:{port}"

            def publish(self, pods):
                write_hosts(hosts, pods)
                proc.send_signal(signal.SIGHUP)  # re-reads --addn-hosts

        yield Dns()
    finally:
        proc.kill()
        proc.wait()


def start_pod(agent, dns, task, index, timeout="20"):
    return subprocess.Popen(
        [agent, "env", "--json", "--replicas", REPLICAS, "--namespace", "ns",
         "--hostname", f"{JOB}-{task}-{index}", "--dns-server", dns.server,
         "--dns-timeout", timeout, "--volcano-dir", "/nonexistent"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items()
             if not k.startswith(("VC_", "VK_", "TF_CONFIG", "DISTJOB_"))})


def finish(procs, timeout=60):
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return results


def check_consistent(results):
    views = []
    for rc, out, err in results:
        assert rc == 0, err
        views.append(json.loads(out))
    configs = [json.loads(v["workers"][0]["env"]["TF_CONFIG"]) for v in views]
    clusters = {json.dumps(c["cluster"], sort_keys=True) for c in configs}
    assert len(clusters) == 1, clusters
    cluster = configs[0]["cluster"]
    assert cluster["ps"] == [f"{host('ps', 0)}:2222"]
    assert cluster["worker"] == [f"{host('worker', i)}:2222" for i in range(3)]
    assert configs[0]["environment"] == "cloud"
    seen = {(c["task"]["type"], c["task"]["index"]) for c in configs}
    assert seen == set(PODS)
    for v, (task, index) in zip(views, PODS):
        assert v["framework"] == "tensorflow"
        assert v["identity"] == {"job": JOB, "task": task, "index": index}


def test_four_pods_agree(agent, dns):
    dns.publish(PODS)
    check_consistent(finish([start_pod(agent, dns, t, i) for t, i in PODS]))


def test_late_record_waits_then_succeeds(agent, dns):
    dns.publish(PODS[:-1])
    procs = [start_pod(agent, dns, t, i, timeout="30") for t, i in PODS]
    try:
        late = host(*PODS[-1])
        # Every agent says it is waiting for the missing name...
        logs = {p.pid: "" for p in procs}
        lock = threading.Lock()

        def drain(p):
            for line in p.stderr:
                with lock:
                    logs[p.pid] += line
        threads = [threading.Thread(target=drain, args=(p,), daemon=True)
                   for p in procs]
        for t in threads:
            t.start()

        def all_waiting():
            with lock:
                return all(f"waiting for 1/4 peers: {late}" in logs[p.pid]
                           for p in procs)
        wait_for(all_waiting, 20, what="every agent waiting for " + late)
        assert all(p.poll() is None for p in procs)
        # ...and goes on once it appears (no negative answer was cached).
        dns.publish(PODS)
        results = []
        for p in procs:
            p.wait(timeout=30)
            for t in threads:
                t.join(timeout=5)
            results.append((p.returncode, p.stdout.read(), logs[p.pid]))
        check_consistent(results)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_missing_record_fails_naming_it(agent, dns):
    dns.publish(PODS[:-1])
    results = finish([start_pod(agent, dns, t, i, timeout="2")
                      for t, i in PODS])
    missing = host(*PODS[-1])
    for rc, _, err in results:
        assert rc == 138, err
        assert missing in err
        assert host("ps", 0) + "," not in err.split("DNS after")[-1]


def test_aaaa_only_peer_resolves(agent, dns):
    dns.publish(PODS)
    rc = subprocess.run(
        [agent, "env", "--peers", f"worker={JOB}-v6-0.ns.svc,{host('ps', 0)}",
         "--task", "worker", "--task-index", "0", "--job-name", JOB,
         "--dns-server", dns.server, "--dns-timeout", "5",
         "--framework", "tensorflow", "--volcano-dir", "/nonexistent"],
        capture_output=True, text=True, timeout=30)
    assert rc.returncode == 0, rc.stderr
