"""deploy/: the kustomize base (the init-container pattern) and each
overlay render exactly the example manifest they stand for, with
`kubectl kustomize` where it is installed and with tests/kustomize.py (the
features the overlays use, nothing more) everywhere; both must agree."""

import copy
import pathlib
import shutil
import subprocess

import pytest
import yaml

import kustomize

ROOT = pathlib.Path(__file__).resolve().parents[2]
OVERLAYS = {
    "volcano": "volcano-pytorch-initcontainer.yaml",
    "pytorchjob": "kubeflow-pytorchjob-initcontainer.yaml",
    "jobset": "jobset-pytorch-initcontainer.yaml",
    "trainer-v2": "trainer-v2-runtime-initcontainer.yaml",
}


def example(name):
    path = ROOT / "examples" / "k8s" / name
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kubectl_kustomize(directory):
    """`kubectl kustomize`'s output; None where kubectl is missing or its
    kustomize predates replacements (kubectl < 1.27, e.g. Debian 12's
    1.20), which the overlays need."""
    if shutil.which("kubectl") is None:
        return None
    r = subprocess.run(["kubectl", "kustomize", str(directory)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "replacements" in r.stderr:
        return None
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def test_every_overlay_is_tested():
    found = {p.name for p in (ROOT / "deploy" / "overlays").iterdir()}
    assert found == set(OVERLAYS)


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_overlay_renders_its_example(overlay):
    directory = ROOT / "deploy" / "overlays" / overlay
    want = example(OVERLAYS[overlay])
    assert kustomize.render(directory) == want
    real = kubectl_kustomize(directory)
    if real is not None:
        assert real == want


@pytest.mark.parametrize("overlay", sorted(OVERLAYS))
def test_the_example_runs_the_base_pod(overlay):
    """Every pod template of the rendered example is the base's pattern:
    the agent installed by the init container, the command prefixed."""
    [base] = kustomize.render_with_local(ROOT / "deploy" / "base")
    pattern = base["template"]["spec"]
    for doc in example(OVERLAYS[overlay]):
        templates = list(pod_templates(doc))
        assert templates, overlay
        for t in templates:
            assert t["spec"]["initContainers"] == pattern["initContainers"]
            [c] = t["spec"]["containers"]
            assert c["command"] == ["/opt/distjob/distjob-agent", "run", "--"]


def pod_templates(node):
    if isinstance(node, dict):
        if "containers" in node.get("spec", {}):
            yield node
        for value in node.values():
            yield from pod_templates(value)
    elif isinstance(node, list):
        for value in node:
            yield from pod_templates(value)


def test_renderer_refuses_what_it_does_not_implement(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(
        "resources: []\nnamePrefix: x-\n")
    with pytest.raises(ValueError, match="namePrefix"):
        kustomize.render(tmp_path)


def test_renderer_applies_patches_then_replacements(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("resources: [t.yaml]\n")
    (base / "t.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "p", "annotations": {
            "config.kubernetes.io/local-config": "true"}},
        "template": {"spec": {"containers": [{"name": "a"}]}}}))
    over = tmp_path / "over"
    over.mkdir()
    job = {"apiVersion": "x/v1", "kind": "J", "metadata": {"name": "j"},
           "spec": {"tasks": [{"template": {}}, {"template": {}}]}}
    (over / "j.yaml").write_text(yaml.safe_dump(job))
    (over / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["../base", "j.yaml"],
        "patches": [{"target": {"kind": "PodTemplate", "name": "p"},
                     "patch": "- op: replace\n"
                              "  path: /template/spec/containers/0/name\n"
                              "  value: b\n"}],
        "replacements": [{
            "source": {"kind": "PodTemplate", "name": "p",
                       "fieldPath": "template"},
            "targets": [{"select": {"kind": "J", "name": "j"},
                         "fieldPaths": ["spec.tasks.*.template"]}]}]}))
    want = copy.deepcopy(job)
    for task in want["spec"]["tasks"]:
        task["template"] = {"spec": {"containers": [{"name": "b"}]}}
    assert kustomize.render(over) == [want]
    real = kubectl_kustomize(over)
    if real is not None:
        assert real == [want]
