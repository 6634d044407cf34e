"""The command line: help, version, and clear errors for bad input."""

import re


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
    r = run_agent(["run", "--nproc-per-nod", "2", "--", "true"])
    assert r.returncode == 2
    assert "--nproc-per-nod" in r.stderr


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
