"""`distjob-agent env` on Volcano inputs: what each pod gets, and malformed
inputs, each of which must exit 2 with a message naming the input (never a
crash; CI also runs these against the ASan/UBSan build via DISTJOB_AGENT)."""

import json
import os
import socket
import time

import pytest

CLEAN = {k: None for k in os.environ
         if k.startswith(("VC_", "VK_", "PET_", "DISTJOB_", "MASTER_"))
         or k in ("TF_CONFIG", "DMLC_ROLE", "WORLD_SIZE", "RANK")}


def volcano(tmp_path, files):
    d = tmp_path / "volcano"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)
    return d


def env_json(run_agent, d, hostname, *args, env=None):
    r = run_agent(["env", "--json", "--explain", "--volcano-dir", str(d),
                   "--hostname", hostname, "--dns-timeout", "0", *args],
                  env={**CLEAN, **(env or {})})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_volcano_pytorch_worker(run_agent, tmp_path):
    d = volcano(tmp_path, {"master.host": "pj-master-0.pj",
                           "worker.host": "pj-worker-0.pj\npj-worker-1.pj\n"
                                          "pj-worker-2.pj"})
    v = env_json(run_agent, d, "pj-worker-2", "--nproc-per-node", "2",
                 env={"MASTER_PORT": "23456", "VC_TASK_INDEX": "2"})
    assert v["framework"] == "pytorch"
    assert v["identity"] == {"job": "pj", "task": "worker", "index": 2}
    w1 = v["workers"][1]
    assert w1["env"]["MASTER_ADDR"] == "pj-master-0.pj"
    assert w1["env"]["GROUP_RANK"] == "3"
    assert w1["env"]["RANK"] == "7"
    assert w1["env"]["WORLD_SIZE"] == "8"
    assert w1["sources"]["MASTER_ADDR"].startswith("volcano file ")
    assert w1["argv"] == []


def test_volcano_mxnet_and_kv_output(run_agent, tmp_path):
    d = volcano(tmp_path, {"scheduler.host": "mx-scheduler-0.mx",
                           "server.host": "mx-server-0.mx",
                           "worker.host": "mx-worker-0.mx\nmx-worker-1.mx"})
    r = run_agent(["env", "--volcano-dir", str(d), "--hostname",
                   "mx-worker-1", "--dns-timeout", "0", "--", "python",
                   "train.py"], env=CLEAN)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "# local_rank 0"
    assert "DMLC_ROLE=worker" in lines
    assert "DMLC_WORKER_ID=1" in lines
    assert "DMLC_PS_ROOT_URI=mx-scheduler-0.mx" in lines
    assert "PATH=" + os.environ.get("PATH", "") not in lines
    assert lines[1:] == sorted(lines[1:])


@pytest.mark.parametrize("files,hostname,env,needle", [
    ({"worker.host": ""}, "j-worker-0", {}, "worker.host is empty"),
    ({"worker.host": "a.j\na.j"}, "j-worker-0", {}, "duplicate host 'a.j'"),
    ({"worker.host": "a.j\nb.j"}, "j-worker-0", {"VC_WORKER_NUM": "3"},
     "VC_WORKER_NUM"),
    ({"worker.host": "a.j\nb.j"}, "j-worker", {}, "hostname 'j-worker'"),
    ({"worker.host": "a.j\nb.j"}, "j-worker-2", {}, "task index 2"),
    ({"worker.host": "a.j\nb.j"}, "j-worker-0", {"VC_TASK_INDEX": "x"},
     "VC_TASK_INDEX"),
    ({"worker.host": "a.j\nb.j", "ps.host": "p.j"}, "j-worker-0",
     {"TF_CONFIG": "{not json"}, "TF_CONFIG"),
    ({}, "j-worker-0", {"TF_CONFIG": "[1,2"}, "TF_CONFIG"),
])
def test_malformed_inputs_exit_2(run_agent, tmp_path, files, hostname, env,
                                 needle):
    d = volcano(tmp_path, files)
    r = run_agent(["env", "--volcano-dir", str(d), "--hostname", hostname,
                   "--dns-timeout", "0"], env={**CLEAN, **env})
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert needle in r.stderr
    assert "AddressSanitizer" not in r.stderr
    assert "runtime error" not in r.stderr


def test_unreadable_host_file_exits_2(run_agent, tmp_path):
    d = volcano(tmp_path, {})
    (d / "worker.host").mkdir()  # unreadable as a file, even for root
    r = run_agent(["env", "--volcano-dir", str(d), "--hostname",
                   "j-worker-0", "--dns-timeout", "0"], env=CLEAN)
    assert r.returncode == 2, r.stderr
    assert "worker.host" in r.stderr


def test_bad_flag_values_exit_2(run_agent):
    for args in (["--framework", "caffe"], ["--tf-roles", "boss=x"],
                 ["--replicas", "worker"], ["--tf-port", "0"]):
        r = run_agent(["env", "--hostname", "j-worker-0", "--job-name", "j",
                       *args], env=CLEAN)
        assert r.returncode == 2, (args, r.stderr)


def test_run_gets_tf_config(run_agent, tmp_path):
    d = volcano(tmp_path, {"ps.host": "tf-ps-0.tf",
                           "worker.host": "tf-worker-0.tf\ntf-worker-1.tf"})
    r = run_agent(["run", "--volcano-dir", str(d), "--hostname",
                   "tf-worker-1", "--dns-timeout", "0", "--no-barrier",
                   "--no-python", "--",
                   "/bin/sh", "-c", 'printf %s "$TF_CONFIG"'], env=CLEAN)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["task"] == {"type": "worker", "index": 1}


def test_run_dns_timeout_is_retryable_and_sigterm_ends_wait(agent, tmp_path):
    import signal
    import subprocess
    from harness import wait_for
    d = volcano(tmp_path, {"worker.host": "a.j\nb.j"})
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env["DISTJOB_TERMINATION_LOG"] = str(tmp_path / "termination-log")
    base = [agent, "run", "--volcano-dir", str(d), "--hostname", "j-worker-0",
            "--dns-server", "127.0.0.1:9", "--no-python"]
    r = subprocess.run(base + ["--dns-timeout", "1", "--", "/bin/true"],
                       env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 138, r.stderr
    assert "a.j, b.j" in r.stderr
    p = subprocess.Popen(base + ["--dns-timeout", "300", "--", "/bin/true"],
                         env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        wait_for(lambda: "waiting for" in (lines.append(p.stderr.readline())
                                           or lines[-1]), 20,
                 what="the agent waiting for DNS")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_env_without_peers_is_plain_torchrun(run_agent):
    r = run_agent(["env", "--json", "--nproc-per-node", "2", "--",
                   "train.py", "--lr", "1"], env=CLEAN)
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["framework"] == "none"
    assert v["identity"] == {"job": "", "task": "", "index": -1}
    assert [w["local_rank"] for w in v["workers"]] == [0, 1]
    assert v["workers"][0]["argv"][-3:] == ["train.py", "--lr", "1"]
    assert v["workers"][1]["env"]["LOCAL_RANK"] == "1"
    assert "PATH" not in v["workers"][0]["env"]
    h = run_agent(["env", "--help"], env=CLEAN)
    assert h.returncode == 0 and "--explain" in h.stdout


def test_bad_master_port_exits_before_the_dns_wait(run_agent, tmp_path):
    # A DNS server that never answers: the peers' names would be waited for
    # the whole --dns-timeout; a bad MASTER_PORT must not wait for it.
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(("127.0.0.1", 0))
    try:
        d = volcano(tmp_path, {"master.host": "pj-master-0.pj",
                               "worker.host": "pj-worker-0.pj"})
        start = time.monotonic()
        r = run_agent(["env", "--volcano-dir", str(d), "--hostname",
                       "pj-worker-0", "--dns-timeout", "60", "--dns-server",
                       "127.0.0.1:%d" % silent.getsockname()[1]],
                      env={**CLEAN, "MASTER_PORT": "0x50",
                           "VC_TASK_INDEX": "0"})
        elapsed = time.monotonic() - start
    finally:
        silent.close()
    assert r.returncode == 2, r.stderr
    assert "MASTER_PORT='0x50'" in r.stderr
    assert elapsed < 2, elapsed
