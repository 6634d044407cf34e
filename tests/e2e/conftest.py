"""Fixtures of the end-to-end suite: clusters of namespace "pods" (see
cluster.py), torn down after each test whatever its outcome."""

import json
import os
import pathlib
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import cluster as cluster_mod  # noqa: E402

_reason = []


def _unavailable():
    if not _reason:
        _reason.append(cluster_mod.unavailable_reason())
        if _reason[0] is None:
            cluster_mod.remove_stale_namespaces()
    return _reason[0]


@pytest.fixture
def artifacts(request, tmp_path):
    """Where a test's pods leave their files: $DISTJOB_E2E_ARTIFACTS/<test>
    when set (kept after the run), else pytest's tmp_path."""
    base = os.environ.get("DISTJOB_E2E_ARTIFACTS")
    if not base:
        return tmp_path
    path = pathlib.Path(base) / request.node.name
    # A previous run's markers would satisfy this run's waits.
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


@pytest.fixture
def make_cluster(request, artifacts):
    """make_cluster(job=..., tasks={...}) -> Cluster; skips where namespaces
    cannot be created, tears every cluster down after the test."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    # Only now: where the suite cannot run, it skips rather than fails.
    agent = request.getfixturevalue("agent")
    made = []

    def make(job, tasks, **kwargs):
        # agent=: another path to the binary (a `torchrun` symlink).
        kwargs.setdefault("agent", agent)
        c = cluster_mod.Cluster(job=job, tasks=tasks,
                                artifacts=artifacts / job, **kwargs)
        made.append(c)
        return c
    yield make
    for c in made:
        c.teardown()


def pytest_configure(config):
    # A CI timeout's SIGTERM must still run the fixtures' teardown (and
    # atexit), or namespaces would outlive the run.
    import signal

    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")
        signal.signal(signal.SIGTERM, interrupt)


_outcomes = {}


def pytest_runtest_logreport(report):
    if "tests/e2e/" not in report.nodeid.replace("\\", "/"):
        return
    # One outcome per scenario: a failed setup or teardown counts as failed.
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        if _outcomes.get(report.nodeid) != "failed":
            _outcomes[report.nodeid] = outcome


_timings = []


@pytest.fixture
def timings(artifacts):
    """timings(case, launcher, what, seconds): one measured duration (fault
    to training resumed, or to exit), printed, kept in the test's artifacts
    (timings.json) and listed in the run's summary."""
    rows = []

    def record(case, launcher, what, seconds):
        row = {"case": case, "launcher": launcher, "what": what,
               "seconds": None if seconds is None else round(seconds, 2)}
        rows.append(row)
        _timings.append(row)
        (artifacts / "timings.json").write_text(json.dumps(rows, indent=1))
        print(f"{case} [{launcher}] {what}: "
              f"{'-' if seconds is None else f'{seconds:.2f} s'}")
    return record


def pytest_terminal_summary(terminalreporter):
    for row in _timings:
        seconds = row["seconds"]
        terminalreporter.write_line(
            f"e2e timing: {row['case']} [{row['launcher']}] {row['what']}: "
            f"{'-' if seconds is None else f'{seconds:.2f} s'}")
    if not _outcomes:
        return
    counts = {}
    for outcome in _outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    terminalreporter.write_line(f"e2e scenarios: {summary}")
    for nodeid, outcome in sorted(_outcomes.items()):
        if outcome == "failed":
            terminalreporter.write_line(f"e2e FAILED: {nodeid}")
