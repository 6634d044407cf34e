"""Self-test of the cluster-in-a-box harness: what every other scenario
relies on. Pods get their own hostname, /etc/volcano and network; peers'
names resolve only once marked ready; teardown leaves nothing behind."""

import os
import time
import socket
import subprocess

from harness import PYTHON, pid_alive, wait_for
import cluster as cluster_mod

# A worker that serves its pod's hostname on TCP 7000 until stopped.
SERVE_HOSTNAME = (
    "import socket\n"
    "s = socket.create_server(('0.0.0.0', 7000))\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    c.sendall(socket.gethostname().encode())\n"
    "    c.close()\n")

DIAL = ("import socket, sys\n"
        "c = socket.create_connection((sys.argv[1], 7000), timeout=5)\n"
        "print(c.recv(100).decode())\n")


def resolve(pod, name):
    r = pod.exec(["getent", "ahostsv4", name])
    return r.stdout.split()[0] if r.returncode == 0 else None


def test_pods_have_identity_dns_and_network(make_cluster):
    c = make_cluster("j", {"master": 1, "worker": 1})
    master, worker = c.pods["j-master-0"], c.pods["j-worker-0"]
    for pod in (master, worker):
        c.start_pod(pod.task, pod.index, ["run", "--standalone", "--no-python",
                                          "--", PYTHON, "-c", SERVE_HOSTNAME])
    for pod in (master, worker):
        pod.agent_pid()
        # UTS namespace: the pod name, as Volcano's svc plugin sets it.
        assert pod.exec(["hostname"]).stdout.strip() == pod.name
        # Mount namespace: the svc plugin's ConfigMap, no trailing newline.
        assert pod.exec(["cat", "/etc/volcano/worker.host"]).stdout == \
            "j-worker-0.j"
        assert pod.exec(["cat", "/etc/volcano/master.host"]).stdout == \
            "j-master-0.j"
        assert f"nameserver {c.DNS_IP}" in \
            pod.exec(["cat", "/etc/resolv.conf"]).stdout
    # The host is untouched: its own hostname, no /etc/volcano, no address
    # in the pods' range.
    assert socket.gethostname() not in ("j-master-0", "j-worker-0")
    assert not os.path.exists("/etc/volcano/worker.host")
    host_addrs = subprocess.run(["ip", "-4", "addr"], capture_output=True,
                                text=True).stdout
    assert c.SUBNET + "." not in host_addrs

    # Headless-service DNS: nothing before readiness...
    assert resolve(master, "j-worker-0.j") is None
    assert resolve(worker, "j-master-0.j") is None
    c.mark_ready(worker)
    # ...then the short Volcano name through the search path, and the FQDN.
    assert resolve(master, "j-worker-0.j") == worker.ip
    assert resolve(master, worker.fqdn) == worker.ip
    assert resolve(worker, "j-master-0.j") is None
    c.mark_ready(master)
    assert resolve(worker, "j-master-0.j") == master.ip
    c.mark_not_ready(worker)
    assert resolve(master, "j-worker-0.j") is None
    c.mark_ready(worker)

    # Pods reach each other by name over the bridge.
    def dial():
        r = master.exec([PYTHON, "-c", DIAL, "j-worker-0.j"])
        return r.stdout.strip() if r.returncode == 0 else None
    assert wait_for(dial, 10, interval=0.1, what="worker's port") == \
        "j-worker-0"

    agents = [p.agent_pid() for p in (master, worker)]
    namespaces = c.namespaces()
    inodes = [os.stat(f"/run/netns/{n}").st_ino for n in namespaces]
    c.teardown()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            text=True).stdout
    assert not [n for n in namespaces if n in listed]
    assert not [pid for pid in agents if pid_alive(pid)]
    assert not [i for i in inodes if cluster_mod.processes_in_netns(i)]
    assert c._dns.poll() is not None


def test_teardown_after_a_failed_start_leaves_nothing(make_cluster):
    c = make_cluster("k", {"worker": 1})
    namespaces = c.namespaces()
    pod = c.start_pod("worker", 0, ["run", "--standalone", "--", "sleep",
                                    "600"])
    agent = pod.agent_pid()
    # As a failing test's finalizer would: no stop signal, just teardown.
    c.teardown()
    assert not pid_alive(agent)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True,
                            text=True).stdout
    assert not [n for n in namespaces if n in listed]


def test_leftover_processes_are_found(make_cluster):
    # The "no process left" assertions of the scenarios must not be
    # vacuous: a process in a pod's network namespace that escaped its
    # agent (the agent reaps and kills its own orphans, so this one is
    # started beside it) shows up, and teardown still kills it.
    c = make_cluster("leak", {"worker": 1}, pid_namespace=False)
    pod = c.start_pod("worker", 0, ["run", "--standalone", "--", "true"])
    assert pod.wait(timeout=10).exit_code == 0
    assert c.leftover_processes() == {}
    stray = subprocess.Popen(["ip", "netns", "exec", pod.netns, "sleep",
                              "600"])
    try:
        leaked = wait_for(c.leftover_processes, 5, what="the stray sleep")
        assert leaked == {"leak-worker-0": [stray.pid]}
        c.teardown()
        assert stray.wait(timeout=5) == -9
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_kill_pod_takes_its_dns_record(make_cluster):
    c = make_cluster("node", {"worker": 2})
    a, b = c.pods["node-worker-0"], c.pods["node-worker-1"]
    for pod in (a, b):
        c.start_pod(pod.task, pod.index,
                    ["run", "--standalone", "--", "sleep", "600"])
        c.mark_ready(pod)
    assert resolve(a, "node-worker-1.node") == b.ip
    c.kill_pod(b)
    assert b.wait(timeout=10).exit_code == 137
    # The kernel tears the pod down asynchronously after the SIGKILL.
    wait_for(lambda: b.processes() == [], 10, what="the pod's processes gone")
    assert resolve(a, "node-worker-1.node") is None


def test_late_records_and_the_query_log(make_cluster):
    c = make_cluster("late", {"worker": 2})
    a, b = c.pods["late-worker-0"], c.pods["late-worker-1"]
    c.start_pod("worker", 0, ["run", "--standalone", "--", "sleep", "600"])
    c.mark_ready(a)
    asked = time.monotonic()
    c.mark_ready_later(b, 1.0)
    assert wait_for(lambda: resolve(a, "late-worker-1.late"), 10,
                    interval=0.1, what="the late record") == b.ip
    assert time.monotonic() - asked >= 1.0
    # The log shows the pod asking, through its search path, before the
    # record existed.
    names = [name for name, client in c.dns_queries() if client == a.ip]
    assert "late-worker-1.late.default.svc.cluster.local" in names
