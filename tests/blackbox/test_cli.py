"""The command line: help, version, and clear errors for bad input."""

import os
import re

from harness import free_port


def test_version(run_agent):
    r = run_agent(["--version"])
    assert r.returncode == 0
    assert re.match(r"distjob-agent \d+\.\d+\.\d+", r.stdout)


def test_help_lists_torchrun_options_in_both_forms(run_agent):
    r = run_agent(["run", "--help"])
    assert r.returncode == 0
    for option in ["--nproc-per-node", "--nnodes", "--rdzv-endpoint",
                   "--max-restarts", "--standalone", "--no-python",
                   "PET_NPROC_PER_NODE", "--shutdown-timeout"]:
        assert option in r.stdout, option


def test_no_command_is_usage_error(run_agent):
    r = run_agent([])
    assert r.returncode == 2
    assert "Usage" in r.stderr


def test_unknown_command(run_agent):
    r = run_agent(["frobnicate"])
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr


def test_unknown_flag_names_it(run_agent):
    # Not "--nproc-per-nod": a unique prefix is that flag, as in argparse.
    r = run_agent(["run", "--nproc-per-nodes", "2", "--", "true"])
    assert r.returncode == 2
    assert "--nproc-per-nodes" in r.stderr


def test_malformed_values_name_flag_and_accepted_forms(run_agent):
    cases = [
        (["--nproc-per-node", "two"], "--nproc-per-node", "cpu, gpu or auto"),
        (["--nnodes", "3:1"], "--nnodes", "MIN:MAX"),
        (["--max-restarts", "-1"], "--max-restarts", "integer"),
        (["--shutdown-timeout", "soon"], "--shutdown-timeout", "seconds"),
        (["--signals-to-handle", "SIGNOPE"], "--signals-to-handle", "SIGTERM"),
    ]
    for flags, name, accepted in cases:
        r = run_agent(["run"] + flags + ["--", "true"])
        assert r.returncode == 2, flags
        assert name in r.stderr and accepted in r.stderr, r.stderr


def test_malformed_env_names_the_variable(run_agent):
    r = run_agent(["run", "--", "true"], env={"PET_NPROC_PER_NODE": "x"})
    assert r.returncode == 2
    assert "PET_NPROC_PER_NODE" in r.stderr


def test_help_after_command_belongs_to_the_worker(run_agent):
    r = run_agent(["run", "--standalone", "--", "sh", "-c",
                   "echo worker-got:$1", "sh", "--help"])
    assert r.returncode == 0
    assert "worker-got:--help" in r.stdout


def test_bad_configuration_still_writes_a_termination_message(run_agent,
                                                              tmp_path):
    log = tmp_path / "termination-log"
    r = run_agent(["run", "--nnodes", "0", "--", "true"],
                  env={"DISTJOB_TERMINATION_LOG": str(log)})
    assert r.returncode == 2
    message = log.read_text()
    assert "exit_code=2" in message and "--nnodes" in message, message


# status, health, preflight and install parse their flags as `run` does.

SUBCOMMAND_USAGE = {
    "status": "Usage: distjob-agent status",
    "health": "Usage: distjob-agent health",
    "preflight": "Usage: distjob-agent preflight",
    "install": "Usage: distjob-agent install",
}


def test_each_subcommand_prints_its_own_help(run_agent):
    for command, usage in SUBCOMMAND_USAGE.items():
        for flag in ["--help", "-h"]:
            r = run_agent([command, flag])
            assert r.returncode == 0, (command, flag, r.stderr)
            assert r.stdout.startswith(usage), (command, r.stdout)
            assert "Options:" in r.stdout, (command, r.stdout)


def test_env_help_is_envs_own_usage(run_agent):
    for flag in ["--help", "-h"]:
        r = run_agent(["env", "--nproc-per-node", "2", flag])
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("Usage: distjob-agent env"), r.stdout
        assert "--json" in r.stdout and "--explain" in r.stdout
        # Run's own options are listed, run's usage line is not.
        assert "--nproc-per-node" in r.stdout
        assert "Usage: distjob-agent run" not in r.stdout


def test_each_subcommand_rejects_an_unknown_flag_naming_it(run_agent,
                                                           tmp_path):
    for command in SUBCOMMAND_USAGE:
        r = run_agent([command, "--no-such-flag", str(tmp_path / "d")])
        assert r.returncode == 2, (command, r.stderr)
        assert "--no-such-flag" in r.stderr, (command, r.stderr)
        assert f"distjob-agent {command}:" in r.stderr, r.stderr
    assert not (tmp_path / "d").exists()


def test_status_accepts_equals_and_underscore_spellings(run_agent):
    # Nothing listens on port 1: the flags parsed, the store is unreachable.
    for args in (["--rdzv-endpoint=127.0.0.1:1", "--timeout=0.2"],
                 ["--rdzv_endpoint", "127.0.0.1:1", "--timeout", "0.2"]):
        r = run_agent(["status"] + args)
        assert r.returncode == 138, (args, r.stderr)
    r = run_agent(["status", "--rdzv-endpoint=127.0.0.1:1", "--timeout=x"])
    assert r.returncode == 2 and "--timeout" in r.stderr, r.stderr


def test_health_accepts_equals_form_and_names_bad_values(run_agent):
    port = free_port()  # nothing listens: the probe is refused
    r = run_agent(["health", f"--port={port}", "--timeout=0.5",
                   "--service=liveness"])
    assert r.returncode == 1, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr, r.stderr
    r = run_agent(["health", "--port=0"])
    assert r.returncode == 2 and "--port" in r.stderr, r.stderr
    r = run_agent(["health", "--port=1", "--timeout=0"])
    assert r.returncode == 2 and "--timeout" in r.stderr, r.stderr
    r = run_agent(["health"])
    assert r.returncode == 2 and "--port is required" in r.stderr, r.stderr


def test_install_accepts_dir_flag_in_both_forms(run_agent, tmp_path):
    for args in (["--dir", str(tmp_path / "a")], [f"--dir={tmp_path / 'b'}"],
                 ["--", str(tmp_path / "c")]):
        r = run_agent(["install"] + args)
        assert r.returncode == 0, (args, r.stderr)
    for d in "abc":
        assert os.readlink(tmp_path / d / "torchrun") == "distjob-agent"
    r = run_agent(["install", "--dir", str(tmp_path / "x"),
                   str(tmp_path / "y")])
    assert r.returncode == 2 and "not both" in r.stderr, r.stderr
    r = run_agent(["install", str(tmp_path / "x"), str(tmp_path / "y")])
    assert r.returncode == 2 and "unexpected argument" in r.stderr, r.stderr
