"""Current torchrun's console and log-file options: --local-ranks-filter,
--log-line-prefix-template (and TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE),
--duplicate-stdout-filters / --duplicate-stderr-filters, --logs-specs."""

import socket

WORKER = "echo out$LOCAL_RANK; echo err$LOCAL_RANK >&2"


def test_local_ranks_filter_hides_other_ranks_but_keeps_their_files(
        run_agent, tmp_path):
    logs = tmp_path / "logs"
    r = run_agent(["run", "--nproc-per-node", "2", "--log-dir", str(logs),
                   "--tee", "3", "--local-ranks-filter", "0", "--",
                   "sh", "-c", WORKER])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[default0]:out0"]
    assert "[default0]:err0" in r.stderr and "err1" not in r.stderr
    assert (logs / "attempt_0" / "1" / "stdout.log").read_text() == "out1\n"
    assert (logs / "attempt_0" / "1" / "stderr.log").read_text() == "err1\n"


def test_local_ranks_filter_without_tee_discards_other_ranks(run_agent):
    r = run_agent(["run", "--nproc_per_node", "3", "--local_ranks_filter",
                   "0,2", "--", "sh", "-c", WORKER])
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == ["out0", "out2"]
    assert "err1" not in r.stderr


def test_prefix_template_flag(run_agent, tmp_path):
    r = run_agent(["run", "--nproc-per-node", "2", "--log-dir",
                   str(tmp_path / "l"), "--tee", "1",
                   "--log-line-prefix-template",
                   "<${role_name}|${rank}|${local_rank}|${hostname}> ",
                   "--role", "trainer", "--", "sh", "-c", WORKER])
    assert r.returncode == 0, r.stderr
    host = socket.gethostname()
    assert sorted(r.stdout.splitlines()) == [
        f"<trainer|0|0|{host}> out0", f"<trainer|1|1|{host}> out1"]


def test_prefix_template_from_torchelastic_variable(run_agent, tmp_path):
    r = run_agent(["run", "--log-dir", str(tmp_path / "l"), "--tee", "1",
                   "--", "sh", "-c", WORKER],
                  env={"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "R${rank}: "})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "R0: out0\n"


def test_duplicate_filters_write_filtered_files(run_agent, tmp_path):
    logs = tmp_path / "logs"
    worker = ("echo loss=1 rank$LOCAL_RANK; echo 'a,b'; echo noise; "
              "echo warn$LOCAL_RANK >&2; echo quiet >&2")
    r = run_agent(["run", "--nproc-per-node", "2", "--log-dir", str(logs),
                   "--tee", "3", "--duplicate-stdout-filters", "loss,a,,b",
                   "--duplicate_stderr_filters", "warn", "--",
                   "sh", "-c", worker])
    assert r.returncode == 0, r.stderr
    out = (logs / "attempt_0" / "filtered_stdout.log").read_text()
    assert sorted(out.splitlines()) == [
        "[default0]:a,b", "[default0]:loss=1 rank0",
        "[default1]:a,b", "[default1]:loss=1 rank1"]
    err = (logs / "attempt_0" / "filtered_stderr.log").read_text()
    assert sorted(err.splitlines()) == ["[default0]:warn0",
                                        "[default1]:warn1"]
    # The console and the per-rank files still get every line.
    assert "[default0]:noise" in r.stdout
    assert (logs / "attempt_0" / "0" / "stderr.log").read_text() == \
        "warn0\nquiet\n"


def test_logs_specs_is_accepted_with_a_notice(run_agent):
    r = run_agent(["run", "--logs-specs", "my_specs", "--", "sh", "-c",
                   "echo ok"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    assert "--logs-specs my_specs: not applicable" in r.stderr
