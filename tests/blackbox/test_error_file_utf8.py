"""The root-cause error file (TORCHELASTIC_ERROR_FILE) is JSON whatever
bytes the worker left: invalid UTF-8 becomes U+FFFD, never a missing or
unparseable file."""

import json

from harness import PYTHON

BAD = [b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]


def test_worker_error_file_with_invalid_utf8(run_agent, tmp_path):
    agent_error = tmp_path / "agent-error.json"
    script = tmp_path / "w.py"
    # The worker writes raw bytes, as a crashing C extension's message might.
    script.write_text(
        "import os\n"
        "bad = " + repr(b" ".join(BAD)) + "\n"
        "with open(os.environ['TORCHELASTIC_ERROR_FILE'], 'wb') as f:\n"
        "    f.write(b'{\"message\": {\"message\": \"boom ' + bad + "
        "b' end\", \"extraInfo\": {\"py_callstack\": \"tb\"}}}')\n"
        "raise SystemExit(3)\n")
    r = run_agent(["run", "--no-python", PYTHON, str(script)],
                  env={"TORCHELASTIC_ERROR_FILE": str(agent_error)})
    assert r.returncode == 3, r.stderr
    data = json.loads(agent_error.read_bytes().decode("utf-8"))
    message = data["message"]["message"]
    assert message.startswith("boom \ufffd") and message.endswith(" end")
    assert data["message"]["errorCode"] == 3
    assert data["message"]["extraInfo"]["py_callstack"] == "tb"


def test_unexecutable_worker_named_with_invalid_utf8(run_agent, tmp_path):
    agent_error = tmp_path / "agent-error.json"
    worker = str(tmp_path).encode() + b"/no-such-\xff\xfe"
    r = run_agent(["run", "--no-python", worker], errors="replace",
                  env={"TORCHELASTIC_ERROR_FILE": str(agent_error)})
    assert r.returncode == 127, r.stderr
    data = json.loads(agent_error.read_bytes().decode("utf-8"))
    assert "no-such-\ufffd\ufffd" in data["message"]["message"]
    assert data["message"]["errorCode"] == 127
