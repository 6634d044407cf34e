"""See the job from outside: `run --metrics-port` serves /metrics (parsed
with prometheus_client's parser), /healthz and /readyz over HTTP, and
`--event-log-handler file:PATH` writes one JSON object per lifecycle event
from which the job's history can be rebuilt."""

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import free_port, wait_for


def get(port, path, host="127.0.0.1"):
    """(status, body) of GET http://host:port/path; (0, "") if refused."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}",
                                    timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0, ""


def scrape(port, host="127.0.0.1"):
    """{(name, frozenset(labels)): value} of one scrape, strictly parsed."""
    status, text = get(port, "/metrics", host)
    assert status == 200, text
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = dict(s.labels)
            # Every series carries the job labels.
            assert {"job_name", "role", "node_rank"} <= labels.keys(), s
            for k in ("job_name", "role", "node_rank"):
                labels.pop(k)
            samples[(s.name, frozenset(labels.items()))] = s.value
    return samples


def value(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def started(start_agent, tmp_path):
    def start(args):
        return start_agent(args, log=tmp_path / "agent.stderr",
                           stdout=subprocess.DEVNULL)
    return start


# Attempt 0 fails retryably (exit 200), attempt 1 runs until `release`
# exists, ignoring SIGTERM.
def restarting_worker(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    release = tmp_path / "release"
    script = (
        f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then touch {first}; '
        f'exit 200; fi; trap "" TERM; touch {second}; '
        f'while [ ! -e {release} ]; do sleep 0.05; done')
    return first, second, release, ["--", "sh", "-c", script]


def test_metrics_and_probes_across_a_restart(started, tmp_path):
    port = free_port()
    first, second, release, command = restarting_worker(tmp_path)
    p = started(["run", "--metrics-port", str(port), "--nproc-per-node", "2",
                 "--rdzv-id", "job-a", "--max-restarts", "1",
                 "--restart-backoff", "2"] + command)
    wait_for(first.exists, 10, what="first attempt")
    # The restart pause: alive, not ready.
    wait_for(lambda: get(port, "/readyz")[0] == 503, 5, what="readyz 503")
    assert get(port, "/healthz")[0] == 200
    wait_for(second.exists, 10, what="second attempt")
    wait_for(lambda: get(port, "/readyz")[0] == 200, 5, what="readyz 200")
    samples = scrape(port)
    assert value(samples, "distjob_worker_group_restarts_total",
                 cause="retryable_exit") == 1
    for cause in ("membership_change", "hang", "oom"):
        assert value(samples, "distjob_worker_group_restarts_total",
                     cause=cause) == 0
    assert value(samples, "distjob_attempt") == 1
    assert value(samples, "distjob_local_workers_alive") == 2
    assert value(samples, "distjob_last_exit_code") == 200
    assert value(samples, "distjob_worker_exits_total",
                 **{"class": "retryable"}) == 1
    assert value(samples, "distjob_last_exit_class",
                 **{"class": "retryable"}) == 1
    assert value(samples, "distjob_last_exit_class",
                 **{"class": "permanent"}) == 0
    assert value(samples, "distjob_rendezvous_rounds_total") == 2
    assert value(samples, "distjob_group_world_size") == 1
    assert value(samples, "distjob_rendezvous_duration_seconds_count") == 2
    # Standalone: no peers to wait for.
    assert value(samples, "distjob_rendezvous_wait_seconds_count") == 2
    assert value(samples, "distjob_rendezvous_wait_seconds_sum") == 0
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_open_fds") > 0
    assert value(samples, "process_max_fds") >= value(samples,
                                                      "process_open_fds")
    assert 0 < time.time() - value(samples,
                                   "process_start_time_seconds") < 600
    # IPv6 too, on the same socket.
    if socket.has_ipv6:
        assert scrape(port, "[::1]")[("distjob_attempt", frozenset())] == 1
    # Labels name the job.
    _, text = get(port, "/metrics")
    assert 'job_name="job-a",role="default",node_rank="0"' in text
    # Not `job`: Prometheus' target label would rename it exported_job.
    assert 'job="' not in text
    assert get(port, "/nope")[0] == 404
    # Shutdown: the worker ignores TERM; not ready at once, still alive.
    p.send_signal(signal.SIGTERM)
    wait_for(lambda: get(port, "/readyz")[0] == 503, 2,
             what="readyz 503 at shutdown")
    assert get(port, "/healthz")[0] == 200
    release.touch()
    assert p.wait(timeout=20) == 143
    assert get(port, "/healthz")[0] == 0  # nothing listens after the exit


def test_port_in_use_exits_2_naming_the_flag(run_agent):
    with socket.socket(socket.AF_INET6) as taken:
        taken.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        taken.bind(("::", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_agent(["run", "--metrics-port", str(port), "--", "true"],
                      timeout=10)
    assert r.returncode == 2
    assert f"--metrics-port: cannot listen on port {port}" in r.stderr


@pytest.mark.parametrize("bad", ["syslog", "file:", ""])
def test_bad_event_log_handler_exits_2(run_agent, bad):
    r = run_agent(["run", "--event-log-handler", bad, "--", "true"],
                  timeout=10)
    assert r.returncode == 2
    assert "--event-log-handler" in r.stderr
    assert "null, console, file:PATH" in r.stderr


def test_unwritable_event_log_exits_2(run_agent, tmp_path):
    path = tmp_path / "missing" / "events"
    r = run_agent(["run", "--event-log-handler", f"file:{path}", "--",
                   "true"], timeout=10)
    assert r.returncode == 2
    assert f"--event-log-handler '{path}': cannot open" in r.stderr


def test_event_log_write_failures_are_warned_once_a_minute(run_agent):
    # /dev/full opens, and every write to it fails (ENOSPC): a run's many
    # events are one warning, not silence and not a line each.
    r = run_agent(["run", "--event-log-handler", "file:/dev/full",
                   "--nproc-per-node", "2", "--", "true"], timeout=10)
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines()
                if "event line(s) lost" in line]
    assert len(warnings) == 1, r.stderr
    assert "file:/dev/full" in warnings[0] and "No space" in warnings[0]


def test_event_log_rebuilds_the_timeline(run_agent, tmp_path):
    events = tmp_path / "events.jsonl"
    script = ('[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && '
              '[ "$LOCAL_RANK" = 1 ] && exit 200; exit 0')
    r = run_agent(["run", "--event-log-handler", f"file:{events}",
                   "--nproc-per-node", "2", "--max-restarts", "1",
                   "--rdzv-id", "job-b", "--", "sh", "-c", script],
                  timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert all(e["job"] == "job-b" and e["node_rank"] == 0 for e in lines)
    assert [e["event"] for e in lines] == [
        "started", "peers_resolved",
        "round_closed", "workers_started", "group_exited", "worker_exited",
        "restart",
        "round_closed", "workers_started", "group_exited",
        "exit"]
    exited = lines[5]
    assert (exited["local_rank"], exited["exit_code"], exited["class"],
            exited["attempt"]) == (1, 200, "retryable", 0)
    assert lines[6]["cause"] == "retryable_exit"
    assert lines[7]["attempt"] == 1
    assert lines[4]["outcome"] == "failed"
    assert lines[9]["outcome"] == "succeeded"
    assert (lines[-1]["exit_code"], lines[-1]["outcome"]) == (0, "success")
    times = [e["time"] for e in lines]
    assert times == sorted(times)


def test_event_log_on_console_records_the_stop_signal(started, tmp_path):
    ran = tmp_path / "ran"
    p = started(["run", "--event-log-handler", "console", "--", "sh", "-c",
                 f"touch {ran}; while :; do sleep 0.05; done"])
    wait_for(ran.exists, 10, what="worker")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=20) == 143
    events = []
    for line in (tmp_path / "agent.stderr").read_text().splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    names = [e["event"] for e in events]
    assert names[-2:] == ["stop_signal", "exit"]
    assert events[-2]["signal"] == "SIGTERM"
    assert events[-1]["exit_code"] == 143


def test_json_log_lines_parse_and_carry_the_context(run_agent):
    r = run_agent(["run", "--log-format", "json", "--rdzv-id", "job-c",
                   "--max-restarts", "1", "--", "sh", "-c",
                   '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 200; '
                   "exit 0"], timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stderr.splitlines()]
    assert lines, r.stderr
    for line in lines:
        assert {"time", "level", "message", "pid", "job"} <= line.keys()
        assert line["job"] == "job-c"
    failed = [line for line in lines if "failed with exit code 200"
              in line["message"]]
    assert len(failed) == 1
    assert (failed[0]["level"], failed[0]["round"],
            failed[0]["attempt"]) == ("error", 0, 0)
    assert lines[-1]["attempt"] == 1


def test_bad_log_format_exits_2(run_agent):
    r = run_agent(["run", "--log-format", "xml", "--", "true"], timeout=10)
    assert r.returncode == 2
    assert "--log-format" in r.stderr and "text, json" in r.stderr


def test_worker_log_format_json_wraps_every_console_line(run_agent, tmp_path):
    logs = tmp_path / "logs"
    r = run_agent(["run", "--log-format", "json", "--worker-log-format",
                   "json", "--tee", "3", "--log-dir", str(logs),
                   "--nproc-per-node", "2", "--", "sh", "-c",
                   r"""printf 'a "q" \\ b\n'; printf 'err\377\n' >&2; """
                   r"""printf 'tail'"""], timeout=30)
    assert r.returncode == 0, r.stderr
    workers = []
    for text in (r.stdout, r.stderr):
        for line in text.splitlines():
            record = json.loads(line)  # every console line is one object
            if "stream" in record:
                assert record.keys() == {"rank", "local_rank", "stream",
                                         "line"}, record
                workers.append(record)
    for rank in (0, 1):
        mine = sorted((w["stream"], w["line"]) for w in workers
                      if w["rank"] == rank and w["local_rank"] == rank)
        assert mine == [("stderr", "err\ufffd"), ("stdout", 'a "q" \\ b'),
                        ("stdout", "tail")], workers
        # The files keep the worker's bytes.
        attempt = logs / "attempt_0" / str(rank)
        assert (attempt / "stdout.log").read_bytes() == b'a "q" \\ b\ntail'
        assert (attempt / "stderr.log").read_bytes() == b"err\xff\n"


def test_bad_worker_log_format_exits_2(run_agent):
    r = run_agent(["run", "--worker-log-format", "xml", "--", "true"],
                  timeout=10)
    assert r.returncode == 2
    assert ("--worker-log-format: 'xml' is not one of: text, json"
            in r.stderr), r.stderr
