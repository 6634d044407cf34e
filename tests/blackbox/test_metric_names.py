"""Every series of a full scrape (the rendezvous store's host serving the
workers' store too) follows Prometheus' naming conventions: counters end in
_total and nothing else does, durations in _seconds, sizes in _bytes, no
label collides with a target label Prometheus sets itself, and the
agent's own process is under the standard process_* names."""

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import Background, full_scrape

# Labels Prometheus attaches to every scraped series: one of ours by the
# same name would be renamed exported_<name>.
TARGET_LABELS = {"job", "instance"}
TIME_WORDS = re.compile(r"\b(time|duration|latency|seconds)\b", re.I)
SIZE_WORDS = re.compile(r"\b(bytes|memory)\b", re.I)
PROCESS = {"process_cpu_seconds_total", "process_resident_memory_bytes",
           "process_start_time_seconds", "process_open_fds",
           "process_max_fds"}


def type_problems(text):
    """Counters named without _total, other types with it, read from the
    TYPE lines as written (prometheus_client's parser would add a
    counter's missing _total itself)."""
    problems = []
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        if kind == "counter" and not name.endswith("_total"):
            problems.append(f"counter {name} does not end in _total")
        elif kind != "counter" and name.endswith("_total"):
            problems.append(f"{kind} {name} ends in _total")
    return problems


def family_problems(family):
    """What is wrong with one parsed family's units and labels."""
    problems = []
    base = family.name
    if TIME_WORDS.search(family.documentation) or \
            re.search(r"duration|latency|_time\b", base):
        if not base.endswith("_seconds"):
            problems.append(f"{base} is a time but does not end in _seconds")
    if SIZE_WORDS.search(family.documentation) and \
            not base.endswith("_bytes"):
        problems.append(f"{base} is a size but does not end in _bytes")
    for s in family.samples:
        clash = TARGET_LABELS & s.labels.keys()
        if clash:
            problems.append(f"{s.name} has the target label(s) "
                            f"{sorted(clash)}")
    return problems


def convention_problems(text):
    problems = type_problems(text)
    for family in text_string_to_metric_families(text):
        problems += family_problems(family)
    return sorted(set(problems))


@pytest.fixture(scope="module")
def scrape(agent, tmp_path_factory):
    with Background() as background:
        return full_scrape(background, agent,
                           tmp_path_factory.mktemp("scrape"))


def sample_names(text):
    return {s.name for f in text_string_to_metric_families(text)
            for s in f.samples}


def test_the_full_scrape_has_every_kind_of_series(scrape):
    names = sample_names(scrape)
    assert "distjob_store_requests_total" in names
    assert "distjob_worker_store_requests_total" in names
    assert "distjob_rendezvous_duration_seconds_bucket" in names
    assert PROCESS <= names


def test_every_series_follows_the_conventions(scrape):
    assert convention_problems(scrape) == []
    labels = {k for f in text_string_to_metric_families(scrape)
              for s in f.samples for k in s.labels}
    assert {"job_name", "role", "node_rank"} <= labels


def test_old_names_are_gone(scrape):
    names = sample_names(scrape)
    assert not {n for n in names if n.startswith("distjob_agent_")}


@pytest.mark.parametrize("bad, why", [
    ('# TYPE x_requests counter\nx_requests{a="1"} 1\n', "_total"),
    ('# TYPE x_open_total gauge\nx_open_total 1\n', "ends in _total"),
    ('# HELP x_wait Time spent waiting.\n# TYPE x_wait gauge\nx_wait 1\n',
     "_seconds"),
    ('# HELP x_held Memory held.\n# TYPE x_held gauge\nx_held 1\n',
     "_bytes"),
    ('# TYPE x_up gauge\nx_up{job="a"} 1\n', "target label"),
])
def test_the_checks_catch_each_mistake(bad, why):
    problems = convention_problems(bad)
    assert problems and why in problems[0], problems
