"""`distjob-agent preflight` (issue 40, item 6) as an init container runs
it: against a fake sysfs tree, a fake nvhcd gRPC server on a Unix socket,
an unresolvable master and unwritable or missing paths. Exit codes are
KEP-3416's (0 pass, 10 warning, 20 retryable, 30 fatal; 2 bad flags) and
--json prints one document."""
import json
import signal
import socket
import subprocess
import time
from concurrent import futures

import grpc
import pytest

from harness import free_port, wait_for


def _string_field(number, text):
    data = text.encode()
    return bytes([number << 3 | 2, len(data)]) + data


def nvhcd_reply(fail_count, success=True):
    """A HealthCheckResponse{success, exit_code, output} encoded by hand:
    the test needs no generated code for three fields."""
    reply = bytes([1 << 3, 1 if success else 0])
    return reply + _string_field(3, json.dumps({"fail_count": fail_count}))


@pytest.fixture
def nvhcd(tmp_path):
    """Starts a fake node health daemon on a Unix socket; returns a function
    taking the reply bytes and giving the unix:// target."""
    servers = []

    def start(reply):
        calls = []

        def run_health_check(request, context):
            calls.append(request)
            return reply

        handler = grpc.method_handlers_generic_handler(
            "nvhcd.HealthCheckService",
            {"RunHealthCheck": grpc.unary_unary_rpc_method_handler(
                run_health_check)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        path = tmp_path / f"nvhcd{len(servers)}.sock"
        server.add_insecure_port(f"unix://{path}")
        server.start()
        servers.append(server)
        return f"unix://{path}", calls

    yield start
    for server in servers:
        server.stop(None)


@pytest.fixture
def sysfs(tmp_path):
    """A fake /sys/class/infiniband with mlx5_0 port 1 in `state`."""
    def make(state):
        root = tmp_path / "infiniband"
        port = root / "mlx5_0" / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "state").write_text(state + "\n")
        return str(root)
    return make


@pytest.fixture
def silent_dns():
    """A DNS server on 127.0.0.1 that never answers: "IP:PORT"."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def preflight_json(run_agent, args, env=None):
    result = run_agent(["preflight", "--json"] + args, env=env)
    return result, json.loads(result.stdout)


def by_check(document, check):
    return [c for c in document["checks"] if c["check"] == check]


CLEAN_ENV = {"MASTER_ADDR": None, "PET_MASTER_ADDR": None,
             "PET_RDZV_ENDPOINT": None, "DISTJOB_PEERS": None,
             "DISTJOB_PEERS_FILE": None}


def test_healthy_node_passes(run_agent, tmp_path, nvhcd, sysfs):
    target, calls = nvhcd(nvhcd_reply(0))
    result, doc = preflight_json(run_agent, [
        "--master-addr", "127.0.0.1", "--check-path", str(tmp_path),
        "--check-writable", str(tmp_path), "--ib-sysfs-root",
        sysfs("4: ACTIVE"), "--health-daemon", target], env=CLEAN_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert doc["result"] == "pass" and doc["exit_code"] == 0
    assert [c["check"] for c in doc["checks"]] == [
        "dns", "path", "writable", "infiniband", "health-daemon"]
    assert by_check(doc, "infiniband")[0]["target"] == "mlx5_0/1"
    assert by_check(doc, "health-daemon")[0]["detail"] == "fail_count 0"
    assert len(calls) == 1


def test_port_down_is_a_warning_unless_required(run_agent, sysfs):
    root = sysfs("1: DOWN")
    result, doc = preflight_json(run_agent, ["--ib-sysfs-root", root],
                                 env=CLEAN_ENV)
    assert result.returncode == 10, result.stdout + result.stderr
    assert by_check(doc, "infiniband")[0]["result"] == "warning"
    result, doc = preflight_json(
        run_agent, ["--ib-sysfs-root", root, "--require-ib"], env=CLEAN_ENV)
    assert result.returncode == 20
    assert doc["result"] == "retryable"


def test_unhealthy_daemon_is_retryable(run_agent, tmp_path, nvhcd):
    target, _ = nvhcd(nvhcd_reply(2))
    result, doc = preflight_json(run_agent, [
        "--ib-sysfs-root", str(tmp_path / "no-ib"),
        "--health-daemon", target], env=CLEAN_ENV)
    assert result.returncode == 20, result.stdout + result.stderr
    check = by_check(doc, "health-daemon")[0]
    assert check["result"] == "retryable"
    assert check["detail"] == "fail_count 2"


def test_unresolvable_master_is_retryable_in_time(run_agent, tmp_path,
                                                  silent_dns):
    start = time.monotonic()
    result, doc = preflight_json(run_agent, [
        "--ib-sysfs-root", str(tmp_path / "no-ib"), "--dns-server",
        silent_dns, "--timeout", "1",
        "--rdzv-endpoint", "127.0.0.1:1"],
        env=dict(CLEAN_ENV, MASTER_ADDR="master-0.invalid"))
    assert time.monotonic() - start < 10
    assert result.returncode == 20, result.stdout + result.stderr
    dns = by_check(doc, "dns")[0]
    assert dns["target"] == "master-0.invalid"
    assert dns["result"] == "retryable"
    assert by_check(doc, "tcp")[0]["result"] == "retryable"


@pytest.mark.parametrize("flag,path", [
    ("--check-writable", "/proc"),  # not writable, even for root
    ("--check-path", "/nonexistent/data"),
])
def test_unusable_paths_are_fatal(run_agent, tmp_path, flag, path):
    result, doc = preflight_json(run_agent, [
        "--ib-sysfs-root", str(tmp_path / "no-ib"), flag, path],
        env=CLEAN_ENV)
    assert result.returncode == 30, result.stdout + result.stderr
    assert doc["result"] == "fatal"
    assert [c["target"] for c in doc["checks"] if c["result"] == "fatal"] \
        == [path]


def test_one_summary_line_per_check(run_agent, tmp_path):
    result = run_agent(["preflight", "--ib-sysfs-root",
                        str(tmp_path / "no-ib"), "--check-path",
                        "/nonexistent/data", "--master-addr", "127.0.0.1"],
                       env=CLEAN_ENV)
    assert result.returncode == 30
    lines = result.stdout.splitlines()
    assert lines[0].startswith("PASS  dns  127.0.0.1: 127.0.0.1")
    assert lines[1].startswith("FATAL  path  /nonexistent/data: stat: ")
    assert lines[2].startswith("PASS  infiniband")
    assert lines[3] == "preflight: fatal (exit 30)"


@pytest.mark.parametrize("args,named", [
    (["--port", "70000"], "--port"),
    (["--health-daemon", "tcp://127.0.0.1:1"], "--health-daemon"),
    (["--no-such-flag"], "--no-such-flag"),
])
def test_bad_flags_exit_2(run_agent, args, named):
    result = run_agent(["preflight"] + args, env=CLEAN_ENV)
    assert result.returncode == 2
    assert named in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def _blocks_sigterm(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1))
    return False


def test_sigterm_ends_it_within_a_second(start_agent, tmp_path, silent_dns):
    proc = start_agent(["preflight", "--ib-sysfs-root",
                        str(tmp_path / "no-ib"), "--dns-server", silent_dns,
                        "--timeout", "60", "--master-addr",
                        "master-0.invalid"], env=CLEAN_ENV,
                       stdout=subprocess.DEVNULL)
    wait_for(lambda: _blocks_sigterm(proc.pid), 10,
             what="preflight blocking its stop signals")
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=5) == 128 + signal.SIGTERM
    assert time.monotonic() - start < 1.0


# `run --preflight`: the same checks before discovery waits; the agent's
# own exit classes (1-127 permanent, 138 retryable) and its log.
def test_run_preflight_fatal_path_stops_before_the_command(run_agent,
                                                           tmp_path):
    marker = tmp_path / "ran"
    result = run_agent(["run", "--preflight", "--check-path",
                        "/nonexistent/data", "--", "touch", str(marker)],
                       env=CLEAN_ENV)
    assert result.returncode == 2, result.stderr  # permanent class
    assert not marker.exists()
    assert "preflight: FATAL  path  /nonexistent/data: stat: " \
        in result.stderr
    message = (tmp_path / "termination-log").read_text()
    assert "/nonexistent/data" in message


def test_run_preflight_unreachable_store_is_retryable(run_agent, tmp_path):
    marker = tmp_path / "ran"
    endpoint = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = run_agent(["run", "--preflight", "--rdzv-backend", "c10d",
                        "--rdzv-endpoint", endpoint, "--rdzv-conf",
                        "is_host=false", "--nnodes", "1:2", "--",
                        "touch", str(marker)], env=CLEAN_ENV)
    assert result.returncode == 138, result.stderr
    assert not marker.exists()
    assert f"preflight: RETRYABLE  tcp  {endpoint}: " in result.stderr


def test_run_preflight_passing_runs_the_command(run_agent, tmp_path):
    marker = tmp_path / "ran"
    result = run_agent(["run", "--preflight", "--check-path", str(tmp_path),
                        "--check-writable", str(tmp_path), "--",
                        "touch", str(marker)], env=CLEAN_ENV)
    assert result.returncode == 0, result.stderr
    assert marker.exists()
    assert f"preflight: PASS  path  {tmp_path}: " in result.stderr
    assert f"preflight: PASS  writable  {tmp_path}: " in result.stderr


def test_run_check_without_preflight_exits_2(run_agent, tmp_path):
    result = run_agent(["run", "--check-path", str(tmp_path), "--", "true"],
                       env=CLEAN_ENV)
    assert result.returncode == 2
    assert "--check-path is a check of --preflight" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_run_preflight_sigterm_stops_within_a_second(start_agent, tmp_path,
                                                     silent_dns):
    marker = tmp_path / "ran"
    log = tmp_path / "agent.log"
    # The name never resolves: without the stop, its 5 s bound ends the
    # check and run exits 138.
    proc = start_agent(["run", "--preflight", "--dns-server", silent_dns,
                        "--master-addr", "master-0.invalid", "--",
                        "touch", str(marker)], env=CLEAN_ENV, log=log)
    wait_for(lambda: _blocks_sigterm(proc.pid), 10,
             what="run blocking its stop signals")
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM, log.read_text()
    assert time.monotonic() - start < 1.0
    assert not marker.exists()
    assert "preflight: RETRYABLE  dns  master-0.invalid: stopped" \
        in log.read_text()
