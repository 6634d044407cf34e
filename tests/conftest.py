"""Shared fixtures of the black-box, integration and end-to-end suites.

They test the built static binary from the outside, the way tini and
dumb-init test themselves: exit codes, signals, the process tree.
"""

import os
import pathlib
import signal
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from harness import Background, agent_binary, agent_env  # noqa: E402

# A suite started in the background by a shell without job control (`cmd &`)
# inherits SIGQUIT (and SIGINT) ignored, and one started under `nohup`
# SIGHUP. The agent rightly hands inherited dispositions on to its workers,
# so the tests that signal workers would see them ignore those; start every
# agent from a default disposition.
for _sig in (signal.SIGQUIT, signal.SIGHUP):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, signal.SIG_DFL)
# Python translates SIGINT into KeyboardInterrupt only where it was not
# ignored at start: inherited ignored, every worker ignored it too, and the
# SIGINT case of test_each_stop_signal_ends_the_job_without_restart waited
# out the agent's shutdown grace before it killed them (25 s in CI).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def agent():
    """Path to the distjob-agent binary under test."""
    path = agent_binary()
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built: run `bazel build "
                    "//agent:distjob-agent` or set DISTJOB_AGENT")
    return path


@pytest.fixture
def run_agent(agent, tmp_path):
    """Runs the agent to completion with a deadline and returns the result.

    `env` entries update the test's environment; a None value unsets one.
    """
    def run(args, env=None, timeout=60, **kwargs):
        return subprocess.run([agent] + list(args),
                              env=agent_env(tmp_path, env),
                              capture_output=True, text=True,
                              timeout=timeout, **kwargs)
    return run


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the item, for fixtures that act on a
    failure."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def background(request):
    """harness.Background: processes started in the background, killed
    with their descendants when the test ends. When the test failed, the
    tails of their logs are printed (CI shows a failure's output only)."""
    with Background() as procs:
        yield procs
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed and procs.logs:
            print(procs.log_tails())


@pytest.fixture
def start_agent(agent, tmp_path, background):
    """Starts the agent in the background and returns its Popen; it is
    killed with its workers when the test ends. `env` as run_agent's; `log`
    and the rest as harness.spawn's."""
    def start(args, env=None, log=None, **kwargs):
        return background.start([agent] + list(args),
                                env=agent_env(tmp_path, env), log=log,
                                **kwargs)
    return start


# Tiers an inner-loop run can leave out (`-m "not e2e and not images"`):
# each test gets the markers of what it needs, from where it lives.
def _tiers(item):
    path = pathlib.Path(str(item.fspath))
    if "e2e" in path.parts:
        yield "e2e"
    if "images" in path.parts:
        yield "images"
    if "ddp" in path.name or path.name == "test_e2e_failures.py":
        yield "ddp"  # real torch.distributed workers (gloo)
    if "etcd" in item.nodeid or "etcd_cluster" in getattr(
            item, "fixturenames", ()):
        yield "etcd"


def pytest_collection_modifyitems(config, items):
    for item in items:
        for tier in _tiers(item):
            item.add_marker(tier)
