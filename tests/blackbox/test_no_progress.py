"""--max-no-progress-restarts (README "Exit codes", docs/supervision.md):
attempts that fail before any sign of progress end the job with exit 81,
permanent, instead of restarting until the budget is spent."""

from harness import PYTHON

NO_PROGRESS = 81


def launches(path):
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_three_attempts_without_progress_end_the_job_with_81(run_agent,
                                                             tmp_path):
    side = tmp_path / "launches"
    progress = tmp_path / "iteration"
    r = run_agent(["run", "--max-restarts", "10",
                   "--max-no-progress-restarts", "3",
                   "--progress-file", str(progress), "--",
                   "sh", "-c", f"echo x >> {side}; exit 200"])
    assert r.returncode == NO_PROGRESS, r.stderr
    # Not 11: the budget left is not spent on a job that cannot progress.
    assert launches(side) == 3, r.stderr
    assert "3 consecutive attempt(s) ended without progress" in r.stderr
    assert str(progress) in r.stderr
    message = (tmp_path / "termination-log").read_text()
    assert message.startswith(
        f"distjob-agent: permanent exit_code={NO_PROGRESS}"), message


def test_an_attempt_that_writes_the_progress_file_resets_the_count(
        run_agent, tmp_path):
    side = tmp_path / "launches"
    progress = tmp_path / "iteration"
    # The second attempt writes its iteration, then fails like the others.
    script = (f"echo x >> {side}; "
              f'[ "$(wc -l < {side})" -eq 2 ] && echo 100 > {progress}; '
              "exit 200")
    r = run_agent(["run", "--max-restarts", "10",
                   "--max-no-progress-restarts", "2",
                   "--progress-file", str(progress), "--", "sh", "-c", script],
                  env={"DISTJOB_TRAINING_PROGRESS_FILE": None})
    assert r.returncode == NO_PROGRESS, r.stderr
    # 1: none (1 of 2), 2: progress (0), 3 and 4: none (2 of 2).
    assert launches(side) == 4, r.stderr


def test_a_heartbeat_is_progress(run_agent, tmp_path):
    side = tmp_path / "launches"
    # The first attempt heartbeats, the second does not.
    code = (f"import os\n"
            f"with open({str(side)!r}, 'a') as f: f.write('x\\n')\n"
            f"if len(open({str(side)!r}).read().split()) == 1:\n"
            f"    open(os.environ['DISTJOB_HEARTBEAT_FILE'], 'w').close()\n"
            f"raise SystemExit(200)\n")
    r = run_agent(["run", "--max-restarts", "10",
                   "--max-no-progress-restarts", "1", "--hang-timeout", "60",
                   "--no-python", PYTHON,
                   "-c", code])
    assert r.returncode == NO_PROGRESS, r.stderr
    assert launches(side) == 2, r.stderr


def test_the_limit_is_off_by_default(run_agent, tmp_path):
    side = tmp_path / "launches"
    r = run_agent(["run", "--max-restarts", "4", "--",
                   "sh", "-c", f"echo x >> {side}; exit 200"])
    assert r.returncode == 200, r.stderr
    assert launches(side) == 5, r.stderr


def test_a_permanent_failure_keeps_its_own_code(run_agent, tmp_path):
    r = run_agent(["run", "--max-restarts", "10",
                   "--max-no-progress-restarts", "1", "--",
                   "sh", "-c", "exit 3"])
    assert r.returncode == 3, r.stderr


def test_a_negative_limit_is_exit_2_naming_the_flag(run_agent):
    r = run_agent(["run", "--max-no-progress-restarts", "-1", "--", "true"])
    assert r.returncode == 2, r.stderr
    assert "--max-no-progress-restarts" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
