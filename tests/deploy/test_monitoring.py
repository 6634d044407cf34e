"""deploy/monitoring: every metric the Grafana dashboard and the alert
rules query is one the agent really exports (from a real scrape of the
built binary hosting both stores), the rules pass `promtool check rules`
where Debian's prometheus package provides it, and the PodMonitor and
ServiceMonitor select what the base labels and names."""

import json
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import kustomize
from harness import Background, full_scrape

ROOT = pathlib.Path(__file__).resolve().parents[2]
MONITORING = ROOT / "deploy" / "monitoring"
# PromQL words that are not metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "and", "or", "unless", "offset", "inf", "nan"}


def metric_names(expr):
    """The metric names a PromQL expression selects: identifiers that are
    not functions, keywords, label names or values, durations or Grafana
    variables."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)        # strings
    text = re.sub(r"\{[^}]*\}", "", text)                  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)                 # ranges
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)"
                  r"\s*\([^)]*\)", "", text)               # label lists
    text = re.sub(r"\$\w+", "", text)                      # variables
    # Grafana's label_values(METRIC, LABEL): the second is a label.
    text = re.sub(r"label_values\(([^,]*),\s*\w+\)", r"label_values(\1)",
                  text)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = m.group(0)
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        names.add(word)
    return names


def dashboard_exprs():
    dash = json.loads((MONITORING / "dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"]
              if v["type"] == "query"]
    return exprs


def rules():
    doc = yaml.safe_load((MONITORING / "alerts.rules.yaml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


@pytest.fixture(scope="module")
def exported(agent, tmp_path_factory):
    with Background() as background:
        text = full_scrape(background, agent,
                           tmp_path_factory.mktemp("scrape"))
    return {s.name for f in text_string_to_metric_families(text)
            for s in f.samples}


def test_names_are_found_in_promql():
    assert metric_names(
        'sum by (cause) (increase(a_total{job_name=~"$job"}[5m])) '
        '/ on (pod) b_bytes > 3 and c == 0') == {"a_total", "b_bytes", "c"}
    assert metric_names('label_values(x{ns=~"$n"}, job_name)') == {"x"}


def test_dashboard_queries_name_exported_metrics(exported):
    exprs = dashboard_exprs()
    seen = set()
    for expr in exprs:
        names = metric_names(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exported, f"{expr!r}: {sorted(names - exported)}"
        seen |= names
    # What the dashboard is for (issue 43): restarts by cause, rounds and
    # durations, workers alive, store size and requests, last exit class.
    for want in ("distjob_worker_group_restarts_total",
                 "distjob_rendezvous_rounds_total",
                 "distjob_rendezvous_duration_seconds_bucket",
                 "distjob_local_workers_alive", "distjob_store_bytes",
                 "distjob_store_requests_total", "distjob_last_exit_class"):
        assert want in seen, want


def test_alert_rules_name_exported_metrics(exported):
    alerts = {r["alert"]: r["expr"] for r in rules()}
    assert set(alerts) == {"DistjobRestartStorm", "DistjobRendezvousStuck",
                           "DistjobStoreNearLimits", "DistjobRetryableExits"}
    for name, expr in alerts.items():
        names = metric_names(expr)
        assert names, name
        assert names <= exported, f"{name}: {sorted(names - exported)}"


def test_a_renamed_metric_is_caught(exported):
    """The check is not vacuous: the old names fail it."""
    for old in ("distjob_agent_cpu_seconds_total",
                "distjob_agent_resident_memory_bytes"):
        assert not metric_names(f"rate({old}[5m])") <= exported


def test_promtool_accepts_the_rules():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian's prometheus package) not installed")
    r = subprocess.run([promtool, "check", "rules",
                        str(MONITORING / "alerts.rules.yaml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(rules())} rules found" in r.stdout


def test_monitors_select_the_base_pods():
    [base] = kustomize.render_with_local(ROOT / "deploy" / "base")
    template = base["template"]
    labels = template["metadata"]["labels"]
    [container] = template["spec"]["containers"]
    ports = {p["name"] for p in container["ports"]}
    for name, endpoints in (("podmonitor.yaml", "podMetricsEndpoints"),
                            ("servicemonitor.yaml", "endpoints")):
        monitor = yaml.safe_load((MONITORING / name).read_text())
        wanted = monitor["spec"]["selector"]["matchLabels"]
        assert wanted.items() <= labels.items(), name
        for e in monitor["spec"][endpoints]:
            assert e["port"] in ports and e["path"] == "/metrics", name
