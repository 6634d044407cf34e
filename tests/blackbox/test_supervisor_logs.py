"""Per-attempt worker files in torchrun's layout under --log-dir, with
--redirects and --tee."""

import json

from harness import PYTHON

WORKER = ("echo out$LOCAL_RANK; echo err$LOCAL_RANK >&2; "
          'echo "$TORCHELASTIC_ERROR_FILE" > /dev/null; '
          '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 200; exit 0')


def test_redirects_write_attempt_files(run_agent, tmp_path):
    logs = tmp_path / "logs"
    r = run_agent(["run", "--nproc-per-node", "2", "--max-restarts", "1",
                   "--log-dir", str(logs), "--redirects", "3", "--",
                   "sh", "-c", WORKER])
    assert r.returncode == 0, r.stderr
    assert "out0" not in r.stdout and "err1" not in r.stderr
    for rank in (0, 1):
        # Attempt 0 ends when the first rank fails, perhaps before the other
        # printed anything: its files exist, attempt 1 has every line.
        d = logs / "attempt_0" / str(rank)
        assert (d / "stdout.log").exists() and (d / "stderr.log").exists()
        d = logs / "attempt_1" / str(rank)
        assert (d / "stdout.log").read_text() == f"out{rank}\n"
        assert (d / "stderr.log").read_text() == f"err{rank}\n"


def test_tee_prefixes_console_lines(run_agent, tmp_path):
    logs = tmp_path / "logs"
    r = run_agent(["run", "--nproc-per-node", "2", "--log-dir", str(logs),
                   "--tee", "0:1,1:3", "--", "sh", "-c",
                   "echo out$LOCAL_RANK; echo err$LOCAL_RANK >&2"])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["[default0]:out0", "[default1]:out1"]
    assert "err0" in r.stderr and "[default0]:err0" not in r.stderr
    assert "[default1]:err1" in r.stderr
    assert (logs / "attempt_0" / "1" / "stderr.log").read_text() == "err1\n"
    assert not (logs / "attempt_0" / "0" / "stderr.log").exists()


def test_default_output_is_untouched(run_agent):
    r = run_agent(["run", "--", "sh", "-c", "echo plain"])
    assert r.stdout == "plain\n"


def test_worker_error_file_in_the_log_dir(run_agent, tmp_path):
    logs = tmp_path / "logs"
    script = tmp_path / "w.py"
    script.write_text(
        "import json, os\n"
        "json.dump({'message': {'message': 'boom', 'extraInfo': {}}}, "
        "open(os.environ['TORCHELASTIC_ERROR_FILE'], 'w'))\n"
        "raise SystemExit(5)\n")
    r = run_agent(["run", "--log-dir", str(logs), "--no-python", PYTHON,
                   str(script)])
    assert r.returncode == 5
    data = json.loads((logs / "attempt_0" / "0" / "error.json").read_text())
    assert data["message"]["message"] == "boom"


def test_bad_tee_value_exits_2(run_agent):
    r = run_agent(["run", "--tee", "7", "--", "true"])
    assert r.returncode == 2
    assert "--tee" in r.stderr
