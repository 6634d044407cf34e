"""No silent wait, and what runs is visible (issue 37, items 5 and 6): a
joiner whose store refuses connections says so with the address within
seconds, the store host says who joined while it waits, the DNS wait
names the missing peers and its deadline, a static node
says while its master refuses connections, a one-node job
announces no exit barrier, each attempt logs local rank 0's argv and its
interpreter, and an explicit --master-port of a one-node job is where the
workers' store listens.

DISTJOB_TEST_PROGRESS_INTERVAL_MS (a test hook, docs/rendezvous.md)
shortens the progress interval from 15 s, so no case waits for one."""

import os
import socket


from harness import (CLEAN_JOB_ENV, VOLCANO_TF_UNRESOLVABLE,
                     free_port, wait_for)

FAST_PROGRESS = dict(CLEAN_JOB_ENV, DISTJOB_TEST_PROGRESS_INTERVAL_MS="300")


def read(path):
    return path.read_text() if path.exists() else ""


def wait_log(proc, log, text, timeout=15):
    wait_for(lambda: text in read(log) or proc.poll() is not None, timeout,
             interval=0.05, what=f"'{text}' in the log")
    assert text in read(log), read(log)


def test_a_refused_store_is_said_with_its_address_within_seconds(
        start_agent, tmp_path):
    port = free_port()  # nothing listens: connections are refused
    log = tmp_path / "joiner.log"
    proc = start_agent(
        ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}",
         "--rdzv-conf", "is_host=0,join_timeout=120", "/bin/true"],
        env=FAST_PROGRESS, log=log)
    wait_log(proc, log, f"connection refused by 127.0.0.1:{port}")
    # And it goes on saying so, with the deadline, while it retries.
    wait_log(proc, log, "still waiting for the rendezvous store (not "
             f"reachable yet); store at 127.0.0.1:{port}: connection "
             f"refused by 127.0.0.1:{port}; until ")
    assert "Deadline Exceeded" not in read(log)


def test_a_join_that_times_out_on_a_refused_store_says_refused(run_agent):
    port = free_port()
    r = run_agent(["run", "--nnodes", "2", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", f"127.0.0.1:{port}",
                   "--rdzv-conf", "is_host=0,join_timeout=3", "/bin/true"],
                  env=FAST_PROGRESS, timeout=30)
    assert r.returncode == 138, r.stderr
    assert ("the store was not reached within 3s (join_timeout): store at "
            f"127.0.0.1:{port}: connection refused by 127.0.0.1:{port}"
            in r.stderr), r.stderr


def test_the_store_host_says_who_joined_while_it_waits(start_agent,
                                                       tmp_path):
    port = free_port()
    log = tmp_path / "host.log"
    proc = start_agent(
        ["run", "--nnodes", "2", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}", "--local-addr", "127.0.0.1",
         "--rdzv-conf", "join_timeout=120", "/bin/true"],
        env=FAST_PROGRESS, log=log)
    wait_log(proc, log, "still waiting for the rendezvous round 0 (1/2 "
             "nodes joined); joined: 127.0.0.1; until ")


def test_a_static_node_says_while_its_master_refuses(start_agent, tmp_path):
    port = free_port()  # node rank 0 never comes up
    log = tmp_path / "node1.log"
    proc = start_agent(
        ["run", "--nnodes", "2", "--node-rank", "1", "--master-addr",
         "127.0.0.1", "--master-port", str(port), "sleep", "60"],
        env=FAST_PROGRESS, log=log)
    wait_log(proc, log, f"still waiting for the master 127.0.0.1:{port} "
             "(node rank 0's store; --master-addr, --master-port): "
             f"connection refused by 127.0.0.1:{port}")


def test_the_dns_wait_names_the_missing_peers_and_its_deadline(start_agent,
                                                               tmp_path):
    log = tmp_path / "dns.log"
    proc = start_agent(["run", "/bin/true"],
                       env=dict(VOLCANO_TF_UNRESOLVABLE,
                                DISTJOB_TEST_PROGRESS_INTERVAL_MS="300"),
                       log=log)
    line = ("waiting for 3/3 peers: tfj-ps-0.tfj.invalid, "
            "tfj-worker-0.tfj.invalid, tfj-worker-1.tfj.invalid (in DNS until ")
    wait_log(proc, log, line)
    # Said again while nothing changes, once per interval.
    wait_for(lambda: read(log).count(line) >= 2 or proc.poll() is not None,
             15, interval=0.05, what="a second DNS progress line")
    assert read(log).count(line) >= 2, read(log)


def test_a_one_node_c10d_job_announces_no_exit_barrier(run_agent):
    r = run_agent(["run", "--nnodes", "1", "--rdzv-backend", "c10d",
                   "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                   "/bin/true"], env=CLEAN_JOB_ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "exit barrier" not in r.stderr, r.stderr
    assert "waiting for the other nodes" not in r.stderr, r.stderr


def test_each_attempt_logs_the_argv_and_the_interpreter(run_agent, tmp_path):
    script = tmp_path / "w.py"
    script.write_text("import sys\n")
    # PYTHON_EXEC names the interpreter.
    r = run_agent(["run", "--standalone", str(script), "--lr", "1"],
                  env=dict(CLEAN_JOB_ENV, PYTHON_EXEC="/usr/bin/python3"))
    assert r.returncode == 0, r.stderr
    assert (f"attempt 0: local rank 0 runs ['/usr/bin/python3', '-u', "
            f"'{script}', '--lr', '1']; '/usr/bin/python3' is "
            "/usr/bin/python3 (from PYTHON_EXEC)" in r.stderr), r.stderr
    # Else the first python3 on PATH, resolved.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to("/usr/bin/python3")
    r = run_agent(["run", "--standalone", str(script)],
                  env=dict(CLEAN_JOB_ENV, PYTHON_EXEC=None,
                           PATH=f"{bin_dir}:{os.environ['PATH']}"))
    assert r.returncode == 0, r.stderr
    assert (f"attempt 0: local rank 0 runs ['python3', '-u', '{script}']; "
            f"'python3' is {bin_dir}/python3 (the first on PATH)"
            in r.stderr), r.stderr


# The worker connects to MASTER_PORT on loopback: the port it was given,
# and something (the agent's workers' store) listens there.
CHECK_MASTER_PORT = (
    "import os, socket, sys\n"
    "port = int(os.environ['MASTER_PORT'])\n"
    "socket.create_connection(('127.0.0.1', port), timeout=5).close()\n"
    "print('MASTER_PORT', port)\n")


def test_an_explicit_master_port_of_a_one_node_job_is_honoured(run_agent,
                                                               tmp_path):
    script = tmp_path / "check.py"
    script.write_text(CHECK_MASTER_PORT)
    for layout in (["--standalone"],
                   ["--nnodes", "1", "--rdzv-backend", "c10d",
                    "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]):
        port = free_port()
        r = run_agent(["run", *layout, "--master-port", str(port),
                       "--no-python", "/usr/bin/python3", str(script)],
                      env=CLEAN_JOB_ENV, timeout=60)
        assert r.returncode == 0, (layout, r.stdout, r.stderr)
        assert f"MASTER_PORT {port}" in r.stdout, (layout, r.stdout)
        with socket.socket() as s:  # the agent's store is gone with it
            assert s.connect_ex(("127.0.0.1", port)) != 0
