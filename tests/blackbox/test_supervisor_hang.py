"""The hang watchdog (--hang-timeout): a worker that stops refreshing
$DISTJOB_HEARTBEAT_FILE is stopped as a retryable 'hang' failure; one that
keeps heartbeating is spared."""

import time

from harness import PYTHON


def test_worker_that_stops_heartbeating_is_killed(run_agent, tmp_path):
    launches = tmp_path / "launches"
    start = time.monotonic()
    r = run_agent(["run", "--hang-timeout", "1", "--max-restarts", "1",
                   "--shutdown-timeout", "2", "--", "sh", "-c",
                   f'echo x >> {launches}; touch "$DISTJOB_HEARTBEAT_FILE"; '
                   f'exec sleep 1000'], timeout=30)
    elapsed = time.monotonic() - start
    assert r.returncode == 143, r.stderr
    assert len(launches.read_text().split()) == 2  # retryable: restarted
    assert elapsed < 6, elapsed
    assert "made no progress" in r.stderr
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith("distjob-agent: retryable exit_code=143 "
                              "restarts=1/1 oom=false hang=true"), message


def test_worker_that_keeps_heartbeating_is_spared(run_agent):
    r = run_agent(["run", "--hang-timeout", "0.5", "--", "sh", "-c",
                   'for i in $(seq 25); do touch "$DISTJOB_HEARTBEAT_FILE"; '
                   'sleep 0.1; done'], timeout=30)
    assert r.returncode == 0, r.stderr
    assert "made no progress" not in r.stderr


def test_missing_first_heartbeat_uses_its_own_timeout(run_agent, tmp_path):
    start = time.monotonic()
    r = run_agent(["run", "--hang-timeout", "0.3",
                   "--first-heartbeat-timeout", "1.5", "--", "sleep", "1000"],
                  timeout=30)
    elapsed = time.monotonic() - start
    assert r.returncode == 143, r.stderr
    assert 1.4 <= elapsed < 4, elapsed
    assert "hang=true" in (tmp_path / "termination-log").read_text()


def test_diagnostic_signal_comes_first(run_agent, tmp_path):
    marker = tmp_path / "dumped"
    script = tmp_path / "w.py"
    script.write_text(
        "import os, signal, sys, time\n"
        f"signal.signal(signal.SIGUSR1, lambda *_: open('{marker}', 'w')"
        ".write('stack'))\n"
        "open(os.environ['DISTJOB_HEARTBEAT_FILE'], 'w').close()\n"
        "while True: time.sleep(0.05)\n")
    r = run_agent(["run", "--hang-timeout", "0.5", "--hang-signal", "SIGUSR1",
                   "--shutdown-timeout", "1", "--no-python", PYTHON,
                   str(script)], timeout=30)
    assert r.returncode == 143, r.stderr
    assert marker.read_text() == "stack"
