"""Exit codes, restart classes and reporting of `distjob-agent run`
(the README's exit-code table and docs/supervision.md): what Kubernetes and Kubeflow see of a job."""

import concurrent.futures
import json
import signal
import time

import pytest

from harness import PYTHON


def count_launches(run_agent, tmp_path, code, extra=()):
    side = tmp_path / f"launches.{code}"
    r = run_agent(["run", "--max-restarts", "2", *extra, "--",
                   "sh", "-c", f'echo x >> {side}; exit {code}'],
                  env={"DISTJOB_TERMINATION_LOG": str(tmp_path / f"t.{code}")})
    return r.returncode, len(side.read_text().splitlines()), r.stderr


def test_exit_code_matrix(run_agent, tmp_path):
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = dict(zip(range(256), pool.map(
            lambda c: count_launches(run_agent, tmp_path, c), range(256))))
    for code, (rc, launches, stderr) in results.items():
        assert rc == code, (code, stderr)
        assert launches == (1 if code < 128 else 3), (code, launches, stderr)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                                 signal.SIGKILL, signal.SIGSEGV,
                                 signal.SIGABRT])
def test_worker_killed_by_signal_is_128_plus_n(run_agent, tmp_path, sig):
    side = tmp_path / "launches"
    r = run_agent(["run", "--max-restarts", "1", "--no-python", PYTHON, "-c",
                   f"import os; open('{side}', 'a').write('x\\n'); "
                   f"os.kill(os.getpid(), {int(sig)})"])
    assert r.returncode == 128 + sig, r.stderr
    assert len(side.read_text().splitlines()) == 2  # retryable: restarted
    message = (tmp_path / "termination-log").read_text()
    assert f"signal={signal.Signals(sig).name}" in message


def test_exec_failures_are_127_and_126_and_reported(run_agent, tmp_path):
    r = run_agent(["run", "--max-restarts", "3", "--", "no-such-cmd-12345"])
    assert r.returncode == 127, r.stderr
    assert "no-such-cmd-12345" in r.stderr
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith("distjob-agent: exec-failed exit_code=127")
    assert "No such file or directory" in message
    r = run_agent(["run", "--", "/etc"])
    assert r.returncode == 126, r.stderr
    assert "Permission denied" in (tmp_path / "termination-log").read_text()


def test_argv_passes_through_untouched(run_agent):
    r = run_agent(["run", "--", "sh", "-c", 'printf "%s|" "$@"', "sh",
                   "--max-restarts", "", "a b", "--"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--max-restarts||a b|--|"


def test_overrides_and_any_policy(run_agent, tmp_path):
    rc, launches, _ = count_launches(run_agent, tmp_path, 139,
                                     ["--permanent-exit-codes", "139"])
    assert (rc, launches) == (139, 1)
    rc, launches, _ = count_launches(run_agent, tmp_path, 1,
                                     ["--retryable-exit-codes", "1"])
    assert (rc, launches) == (1, 3)
    rc, launches, _ = count_launches(run_agent, tmp_path, 3,
                                     ["--restart-policy", "any"])
    assert (rc, launches) == (3, 3)


def test_bad_supervisor_flags_exit_2(run_agent):
    for args in (["--restart-policy", "maybe"], ["--shutdown-timeout", "-1"],
                 ["--permanent-exit-codes", "300"]):
        r = run_agent(["run", *args, "--", "true"])
        assert r.returncode == 2, (args, r.stderr)
        assert args[0].lstrip("-") in r.stderr


def test_restart_count_and_backoff(run_agent, tmp_path):
    side = tmp_path / "counts"
    start = time.monotonic()
    r = run_agent(["run", "--max-restarts", "2", "--restart-backoff", "0.3",
                   "--", "sh", "-c",
                   f'echo $TORCHELASTIC_RESTART_COUNT >> {side}; exit 200'])
    elapsed = time.monotonic() - start
    assert r.returncode == 200, r.stderr
    assert side.read_text().split() == ["0", "1", "2"]
    assert elapsed >= 0.3 + 0.6  # 0.3 s, then doubled
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith(
        "distjob-agent: retryable exit_code=200 restarts=2/2 ")


def test_previous_attempt_tree_is_dead_before_relaunch(run_agent, tmp_path):
    side = tmp_path / "pids"
    r = run_agent(["run", "--max-restarts", "1", "--", "sh", "-c",
                   f'if [ -s {side} ]; then '
                   f'  kill -0 $(cat {side}) 2>/dev/null && exit 7; exit 0; '
                   f'fi; setsid sleep 600 & echo $! > {side}; kill -9 $$'])
    assert r.returncode == 0, r.stderr


def test_termination_message_success(run_agent, tmp_path):
    r = run_agent(["run", "--", "true"])
    assert r.returncode == 0
    message = (tmp_path / "termination-log").read_text()
    assert message == ("distjob-agent: success exit_code=0 restarts=0/0 "
                       "oom=false hang=false\n")


def test_termination_message_permanent_with_error_file(run_agent, tmp_path):
    agent_error = tmp_path / "agent-error.json"
    script = tmp_path / "w.py"
    script.write_text(
        "import json, os\n"
        "with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w') as f:\n"
        "    json.dump({'message': {'message': 'ValueError: bad input é' + "
        "'x' * 8000 + ' END', 'extraInfo': {'py_callstack': 'Traceback', "
        "'timestamp': '1'}}}, f)\n"
        "raise SystemExit(3)\n")
    r = run_agent(["run", "--nproc-per-node", "2", "--max-restarts", "2",
                   "--no-python", PYTHON, str(script)],
                  env={"TORCHELASTIC_ERROR_FILE": str(agent_error)})
    assert r.returncode == 3, r.stderr
    raw = (tmp_path / "termination-log").read_bytes()
    assert len(raw) <= 4096
    message = raw.decode("utf-8")  # must be valid UTF-8
    assert message.startswith("distjob-agent: permanent exit_code=3 "
                              "restarts=0/2 oom=false hang=false\n")
    assert "root cause: local_rank=" in message
    assert message.rstrip().endswith("Traceback")
    data = json.loads(agent_error.read_text())
    assert data["message"]["errorCode"] == 3
    assert data["message"]["message"].startswith("ValueError: bad input")


def test_termination_message_unwritable_path_is_skipped(run_agent):
    r = run_agent(["run", "--log-level", "debug", "--", "true"],
                  env={"DISTJOB_TERMINATION_LOG": "/nonexistent/dir/tlog"})
    assert r.returncode == 0
    assert "no termination message" in r.stderr


def test_orphans_exiting_with_the_worker_do_not_change_its_code(run_agent):
    # 50 orphans exit 0 at the moment the worker exits 3: the agent must
    # report the worker's status, not an orphan's.
    r = run_agent(["run", "--", "sh", "-c",
                   "for i in $(seq 50); do (sleep 0.3; exit 0) & done; "
                   "sleep 0.3; exit 3"])
    assert r.returncode == 3, r.stderr


# Rank 1 raises and records its error, then takes a while to unwind (as a
# Python process tearing down torch does); rank 0 sees its peer go, records
# a "connection closed" error and exits first. The root cause is rank 1:
# the first error recorded, not the first exit. Rank 1 is not sent SIGTERM
# while it unwinds (--exit-grace), so its own exit code is reported.
UNWINDING_RANKS = r"""
record() {
  printf '{"message": {"message": "%s", "extraInfo": {"py_callstack": "",
"timestamp": "0"}}}' "$1" > "$TORCHELASTIC_ERROR_FILE"
}
if [ "$LOCAL_RANK" = 1 ]; then
  record "ValueError: loss is NaN"
  touch "$SIDE/recorded"
  while [ ! -e "$SIDE/rank0-exits" ]; do sleep 0.01; done
  sleep 0.3  # unwinding
  exit 3
fi
while [ ! -e "$SIDE/recorded" ]; do sleep 0.01; done
sleep 0.05  # the peer's loss reaches rank 0 after rank 1's record
record "RuntimeError: Connection closed by peer"
touch "$SIDE/rank0-exits"
exit 1
"""


def test_root_cause_is_the_first_error_recorded(run_agent, tmp_path):
    agent_error = tmp_path / "agent-error.json"
    r = run_agent(["run", "--nproc-per-node", "2", "--", "sh", "-c",
                   UNWINDING_RANKS],
                  env={"SIDE": str(tmp_path),
                       "TORCHELASTIC_ERROR_FILE": str(agent_error)})
    assert r.returncode == 3, r.stderr
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith("distjob-agent: permanent exit_code=3"), message
    assert "root cause: local_rank=1" in message, message
    assert "loss is NaN" in message, message
    data = json.loads(agent_error.read_text())
    assert data["message"]["message"] == "ValueError: loss is NaN"
    assert "already recorded an error" in r.stderr


def test_exit_grace_zero_stops_recorded_workers_at_once(run_agent, tmp_path):
    # With no grace the unwinding rank dies of the agent's SIGTERM: stopped,
    # it is no root cause, and the first exit is.
    r = run_agent(["run", "--exit-grace", "0", "--nproc-per-node", "2", "--",
                   "sh", "-c", UNWINDING_RANKS],
                  env={"SIDE": str(tmp_path)})
    assert r.returncode == 1, r.stderr
    message = (tmp_path / "termination-log").read_text()
    assert "root cause: local_rank=0" in message, message
    assert "Connection closed by peer" in message, message
