"""torch's FileTimer served (--file-timer, TORCHELASTIC_ENABLE_FILE_TIMER)
and TORCHELASTIC_HEALTH_CHECK_PORT: a worker whose timer expires is
signalled and its group restarts as hung; releases keep workers alive;
junk on the FIFO costs a log line and nothing else; the health port follows
the workers' progress."""

import json
import os
import pathlib
import re
import textwrap
import time
import urllib.error
import urllib.request

import pytest

from harness import PYTHON, free_port, pid_alive, torch_available, wait_for

# Real torch 1.13 FileTimerClient code, unchanged from what runs under
# torchrun: three steps released in time (longer in all than one timer),
# then, on the first attempt only, a step that overruns expires(after=2).
TORCH_WORKER = textwrap.dedent("""
    import os, pathlib, sys, time
    from torch.distributed.elastic import timer
    out = pathlib.Path(sys.argv[1])
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
    for step in range(3):
        with timer.expires(after=2):
            time.sleep(1)
    if attempt == "0":
        (out / "pid").write_text(str(os.getpid()))
        (out / "t0").write_text(repr(time.time()))
        with timer.expires(after=2):
            time.sleep(100)
    (out / ("done" + attempt)).write_text("ok")
""")


def _request(pid, after, signal=9, scope="s"):
    return json.dumps({"version": 1, "pid": pid, "scope_id": scope,
                       "expiration_time": time.time() + after,
                       "signal": signal}) + "\n"


@pytest.mark.skipif(not torch_available(), reason="needs python3-torch")
def test_overrunning_step_is_killed_and_the_group_restarts(
        start_agent, tmp_path):
    script = tmp_path / "w.py"
    script.write_text(TORCH_WORKER)
    out = tmp_path / "out"
    out.mkdir()
    timer_file = tmp_path / "timer.fifo"
    timer_file.write_text("a stale file torchrun would replace")
    log = tmp_path / "agent.log"
    proc = start_agent(
        ["run", "--max-restarts", "1", "--shutdown-timeout", "2",
         "--no-python", PYTHON, str(script), str(out)],
        env={"TORCHELASTIC_ENABLE_FILE_TIMER": "1",
             "TORCHELASTIC_TIMER_FILE": str(timer_file)},
        log=log)
    pid = int(wait_for(lambda: (out / "pid").exists() and
                       (out / "pid").read_text(), 90, what="the hung step"))
    t0 = float((out / "t0").read_text())
    wait_for(lambda: not pid_alive(pid), 10, what="the overrunning worker's end")
    killed_after = time.time() - t0
    # The three released steps (3 s, more than one timer) did not kill it.
    assert 2.0 <= killed_after < 3.0, killed_after
    assert proc.wait(timeout=90) == 0, log.read_text()
    assert (out / "done1").exists()
    assert not (out / "done0").exists()
    text = log.read_text()
    assert f"of pid {pid} (local_rank 0) expired" in text, text
    assert "SIGKILL" in text
    message = (tmp_path / "termination-log").read_text()
    assert "restarts=1/1" in message
    assert not timer_file.exists()  # removed when the agent exits
    # Evidence before the timer's signal, in the file the message names.
    path = re.search(r"^diagnostics: (.+)$", message, re.M).group(1)
    first = json.loads(pathlib.Path(path).read_text())["collections"][0]
    assert "FileTimer scope" in first["reason"], first
    assert "local_rank 0" in first["reason"], first
    assert first["workers"][0]["pid"] == pid, first
    assert first["workers"][0]["processes"][0]["threads"], first


JUNK_WORKER = textwrap.dedent("""
    import json, os, sys, time
    path = os.environ["TORCHELASTIC_TIMER_FILE"]
    def send(data):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, data)
        os.close(fd)
    def request(pid, after):
        return (json.dumps({"version": 1, "pid": pid, "scope_id": "s",
                            "expiration_time": time.time() + after,
                            "signal": 9}) + "\\n").encode()
    send(b"not json at all\\n")
    send(b'{"version": 2, "pid": 1}\\n')
    for _ in range(3):
        send(b"x" * 4000)  # one 12 KB line, over the 4096 bytes
    send(b"\\n")
    # A pid that is not a worker's: never signalled by the agent.
    send(request(int(sys.argv[1]), 0))
    time.sleep(0.5)
    open(sys.argv[2], "w").write("survived the junk")
    # Still served: this worker's own timer ends it.
    send(request(os.getpid(), 0.5))
    time.sleep(100)
""")


def test_junk_is_refused_and_the_timer_still_served(
        run_agent, tmp_path, background):
    bystander = background.start(["sleep", "1000"])
    script = tmp_path / "w.py"
    script.write_text(JUNK_WORKER)
    marker = tmp_path / "marker"
    start = time.monotonic()
    r = run_agent(["run", "--file-timer", "--shutdown-timeout", "2",
                   "--no-python", PYTHON, str(script), str(bystander.pid),
                   str(marker)], timeout=60)
    assert r.returncode == 137, r.stderr
    assert time.monotonic() - start < 20
    assert marker.read_text() == "survived the junk"
    assert pid_alive(bystander.pid)
    assert "not JSON" in r.stderr
    assert "over 4096 bytes" in r.stderr
    assert f"of pid {bystander.pid} expired" in r.stderr
    assert "not a live worker process" in r.stderr
    assert "hang=true" in (tmp_path / "termination-log").read_text()


def test_timer_file_defaults_to_a_fresh_fifo_in_tmpdir(run_agent, tmp_path):
    r = run_agent(["run", "--file-timer", "--", "sh", "-c",
                   'test -p "$TORCHELASTIC_TIMER_FILE" && '
                   'echo "$TORCHELASTIC_TIMER_FILE"'],
                  env={"TMPDIR": str(tmp_path),
                       "TORCHELASTIC_TIMER_FILE": None})
    assert r.returncode == 0, r.stderr
    path = r.stdout.strip()
    assert path.startswith(f"{tmp_path}/watchdog_timer_"), path
    assert not os.path.exists(path)


def test_bad_values_exit_2_naming_them(run_agent, tmp_path):
    r = run_agent(["run", "--", "true"],
                  env={"TORCHELASTIC_ENABLE_FILE_TIMER": "maybe"})
    assert r.returncode == 2
    assert "TORCHELASTIC_ENABLE_FILE_TIMER" in r.stderr
    r = run_agent(["run", "--file-timer", "--file-timer-path",
                   str(tmp_path / "missing" / "t"), "--", "true"])
    assert r.returncode == 2
    assert "--file-timer-path" in r.stderr
    r = run_agent(["run", "--health-progress-window", "0", "--", "true"])
    assert r.returncode == 2
    assert "--health-progress-window" in r.stderr


def _health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as a:
            return a.status, a.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def _answer_when(port, predicate, timeout, what):
    """The first (status, body) of the health port that `predicate` likes."""
    def check():
        answer = _health(port)
        return answer if predicate(answer) else None
    return wait_for(check, timeout, interval=0.05, what=what)


# Progress through the FileTimer for ~1.5 s, then none, then exit on its
# own once the test saw the 503 (it removes the go-on file).
PROGRESS_WORKER = textwrap.dedent("""
    import json, os, sys, time
    path = os.environ["TORCHELASTIC_TIMER_FILE"]
    def send(after):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, (json.dumps({"version": 1, "pid": os.getpid(),
                                  "scope_id": "step",
                                  "expiration_time": time.time() + after,
                                  "signal": 9}) + "\\n").encode())
        os.close(fd)
    open(sys.argv[1], "w").close()
    for _ in range(15):
        send(60)
        time.sleep(0.1)
    while os.path.exists(sys.argv[1]):
        time.sleep(0.05)
""")


def test_health_port_follows_progress(start_agent, tmp_path):
    port = free_port()
    script = tmp_path / "w.py"
    script.write_text(PROGRESS_WORKER)
    go_on = tmp_path / "go-on"
    log = tmp_path / "agent.log"
    proc = start_agent(
        ["run", "--file-timer", "--health-progress-window", "1",
         "--no-python", PYTHON, str(script), str(go_on)],
        env={"TORCHELASTIC_HEALTH_CHECK_PORT": str(port)}, log=log)
    first = _answer_when(port, lambda a: a[0] is not None, 30,
                         "the health port")
    assert first[0] == 200, first
    wait_for(go_on.exists, 30, what="the worker")
    _answer_when(port, lambda a: a[0] == 200 and
                 a[1].startswith("ok: last progress"), 10,
                 "200 while the worker makes progress")
    stale = _answer_when(port, lambda a: a[0] == 503, 15,
                         "503 once the progress stopped")
    assert stale[1].startswith("no progress: last progress"), stale
    go_on.unlink()
    assert proc.wait(timeout=30) == 0, log.read_text()
