"""Special files as any file the agent reads or writes (issue 39).

A FIFO as an input file hung the agent in open() with its signals blocked
(SIGTERM ignored for minutes); as an output file it blocked the exit. The
cases are generated from `run --help`: every flag whose value is a path
(metavar PATH, PEM, DIR or file:PATH) gets a FIFO, so a new file flag is
covered without editing this file. Inputs must end the agent with exit 2
naming the flag (or variable) and the file; outputs are skipped with a
warning and must not hold up the exit.
"""

import os
import re
import subprocess

import pytest

from harness import agent_binary, free_port, self_signed_cert

# How long any case may take. A FIFO that is waited on blocks forever, so
# any bound tells the two apart; this one leaves room for a loaded machine.
DEADLINE_S = 5

# Flags whose FIFO is skipped with a warning (the run goes on); every other
# generated flag is an input and must be exit 2.
OUTPUT_FLAGS = {"--termination-log", "--error-file", "--event-log-handler"}

# Paths that are no input, each with the flag that turns its feature on
# and the exit it must end with, never waiting on the FIFO: the FileTimer's
# FIFO, which the agent creates itself, replacing what is there
# (docs/hangs.md, as torchrun does); a path run --preflight only stats
# (docs/preflight.md), and one it needs to be a writable directory.
NOT_INPUT_FLAGS = {"--file-timer-path": (["--file-timer"], 0),
                   "--check-path": (["--preflight"], 0),
                   "--check-writable": (["--preflight"], 2)}

# Files named by variables or inside another flag's value, which the help's
# metavars do not show (docs/kubernetes.md: the Trainer push;
# docs/rendezvous.md: the etcd backend).
VARIABLE_CASES = ["KUBEFLOW_TRAINER_SERVER_CA_CERT",
                  "KUBEFLOW_TRAINER_SERVER_TOKEN"]
RDZV_CONF_CASES = ["ca_cert", "cert", "key"]

FLAG_LINE = re.compile(r"^  (--[a-z0-9-]+)(?:, -\w+)? (\S+)$")
PATH_METAVAR = re.compile(r"(^|\|)(PATH|PEM|DIR|file:PATH)($|\|)")


def _help_text():
    return subprocess.run([agent_binary(), "run", "--help"],
                          capture_output=True, text=True, timeout=30,
                          check=True).stdout


def file_flags():
    """Every flag of `run --help` whose value is a path."""
    flags = []
    for line in _help_text().splitlines():
        m = FLAG_LINE.match(line)
        if m and PATH_METAVAR.search(m.group(2)):
            flags.append((m.group(1), m.group(2)))
    return flags


try:
    FILE_FLAGS = file_flags()
except (OSError, subprocess.SubprocessError):
    FILE_FLAGS = []  # test_the_rule_finds_the_file_flags says why


def test_the_rule_finds_the_file_flags():
    """The generation must find the flags known today, or the rule broke."""
    found = {flag for flag, _ in FILE_FLAGS}
    known = {"--rdzv-token-file", "--rdzv-tls-cert", "--rdzv-tls-key",
             "--rdzv-tls-ca", "--metrics-tls-cert", "--metrics-tls-key",
             "--peers-file", "--pod-labels-file", "--volcano-dir",
             "--log-dir", "--termination-log", "--error-file",
             "--event-log-handler"}
    assert known <= found, f"not generated from run --help: {known - found}"


def make_cert(directory, name):
    """A self-signed certificate for localhost and its key, as strings."""
    cert, key = self_signed_cert(directory, name,
                                 "DNS:localhost,IP:127.0.0.1")
    return str(cert), str(key)


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "special.fifo"
    os.mkfifo(path)
    return str(path)


def run_bounded(run_agent, args, env=None):
    try:
        return run_agent(args, env=env, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:  # run_agent killed it
        pytest.fail(f"still running after {DEADLINE_S} s: {args} {env}")


def reach_args(flag, fifo, tmp_path):
    """The flag given the FIFO, with what else the agent needs to read it."""
    if flag == "--event-log-handler":
        return [flag, f"file:{fifo}"]
    if flag in ("--metrics-tls-cert", "--metrics-tls-key"):
        cert, key = make_cert(tmp_path, "metrics")
        other = "--metrics-tls-key" if flag.endswith("cert") else \
            "--metrics-tls-cert"
        return ["--metrics-port", str(free_port()), flag, fifo,
                other, key if other.endswith("key") else cert]
    if flag in ("--rdzv-tls-cert", "--rdzv-tls-key", "--rdzv-tls-ca"):
        cert, key = make_cert(tmp_path, "store")
        files = {"--rdzv-tls-cert": cert, "--rdzv-tls-key": key}
        files[flag] = fifo
        return [arg for item in files.items() for arg in item]
    return [flag, fifo]


COMMAND = ["--standalone", "--no-python", "--", "/bin/true"]


@pytest.mark.parametrize("flag,metavar", FILE_FLAGS,
                         ids=[flag for flag, _ in FILE_FLAGS])
def test_a_fifo_as_a_file_flag(run_agent, tmp_path, fifo, flag, metavar):
    feature, code = NOT_INPUT_FLAGS.get(flag, ([], None))
    r = run_bounded(run_agent,
                    ["run"] + feature + reach_args(flag, fifo, tmp_path) +
                    COMMAND)
    if flag in NOT_INPUT_FLAGS:
        assert r.returncode == code, r.stderr
        if code != 0:
            assert fifo in r.stderr, r.stderr
        return
    if flag in OUTPUT_FLAGS:
        # Skipped with a warning at start; the exit does not wait on it.
        assert r.returncode == 0, r.stderr
        warned = [line for line in r.stderr.splitlines()
                  if flag in line and fifo in line and "FIFO" in line]
        assert len(warned) == 1, r.stderr
    else:
        assert r.returncode == 2, r.stderr
        assert any(flag in line and fifo in line
                   for line in r.stderr.splitlines()), r.stderr


@pytest.mark.parametrize("variable", VARIABLE_CASES)
def test_a_fifo_as_a_file_variable(run_agent, tmp_path, fifo, variable):
    cert, _ = make_cert(tmp_path, "trainer")
    token = tmp_path / "token"
    token.write_text("tok\n")
    env = {"KUBEFLOW_TRAINER_SERVER_URL": "https://localhost:1/status",
           "KUBEFLOW_TRAINER_SERVER_CA_CERT": cert,
           "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)}
    env[variable] = fifo
    r = run_bounded(run_agent, ["run"] + COMMAND, env=env)
    assert r.returncode == 2, r.stderr
    assert any(variable in line and fifo in line
               for line in r.stderr.splitlines()), r.stderr


@pytest.mark.parametrize("key", RDZV_CONF_CASES)
def test_a_fifo_as_an_etcd_tls_file(run_agent, tmp_path, fifo, key):
    cert, pem_key = make_cert(tmp_path, "etcd")
    conf = {"ca_cert": cert, "cert": cert, "key": pem_key}
    conf[key] = fifo
    r = run_bounded(run_agent, [
        "run", "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
        "127.0.0.1:1", "--rdzv-id", "fifo",
        "--rdzv-conf", ",".join(f"{k}={v}" for k, v in conf.items()),
        "--no-python", "--", "/bin/true"])
    assert r.returncode == 2, r.stderr
    assert any(f"--rdzv-conf {key}" in line and fifo in line
               for line in r.stderr.splitlines()), r.stderr


@pytest.mark.parametrize("key", RDZV_CONF_CASES)
def test_an_etcd_tls_file_that_is_not_pem_exits_2_at_start(run_agent,
                                                           tmp_path, key):
    cert, pem_key = make_cert(tmp_path, "etcd")
    junk = tmp_path / "junk.pem"
    junk.write_text("not PEM\n")
    conf = {"ca_cert": cert, "cert": cert, "key": pem_key}
    conf[key] = str(junk)
    r = run_bounded(run_agent, [
        "run", "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
        "127.0.0.1:1", "--rdzv-id", "junk", "--rdzv-conf",
        ",".join(["join_timeout=600"] +
                 [f"{k}={v}" for k, v in conf.items()]),
        "--no-python", "--", "/bin/true"])
    assert r.returncode == 2, r.stderr
    assert any(f"--rdzv-conf {key}" in line and str(junk) in line
               and "not a PEM" in line
               for line in r.stderr.splitlines()), r.stderr


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_a_log_dir_that_is_not_a_directory_exits_2(run_agent, tmp_path, fifo,
                                                   kind):
    path = fifo
    if kind == "file":
        path = str(tmp_path / "a-file")
        open(path, "w").close()
    r = run_bounded(run_agent, ["run", "--log-dir", path, "--tee", "3"] +
                    COMMAND)
    assert r.returncode == 2, r.stderr
    assert any("--log-dir" in line and path in line and "not a directory"
               in line for line in r.stderr.splitlines()), r.stderr


def test_a_token_file_with_control_characters_exits_2(run_agent, tmp_path):
    token = tmp_path / "token"
    token.write_bytes(b"hunter\r\n2\n")
    r = run_bounded(run_agent, ["run", "--rdzv-token-file", str(token)] +
                    COMMAND)
    assert r.returncode == 2, r.stderr
    assert any("--rdzv-token-file" in line and str(token) in line
               for line in r.stderr.splitlines()), r.stderr
    assert "hunter" not in r.stderr
