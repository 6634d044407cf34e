"""A small renderer of the kustomize features deploy/ uses, for machines
without `kubectl kustomize` (kustomize >= 4.5): `resources` (files, and
directories holding a kustomization.yaml), `patches` with a kind/name
`target` and an inline JSON 6902 `patch` (add, replace, remove), and
`replacements` copying one field of a source resource to `fieldPaths`
of the selected targets (dot-separated, `*` for every list item). A
resource annotated config.kubernetes.io/local-config: "true" is dropped
from the output, as kustomize does. Anything else in a kustomization is
refused, so an overlay cannot silently depend on a feature this file does
not implement."""

import copy
import pathlib

import yaml

KNOWN = {"apiVersion", "kind", "resources", "patches", "replacements"}
LOCAL = "config.kubernetes.io/local-config"


def render(directory):
    """The resources `directory`'s kustomization produces, in order."""
    directory = pathlib.Path(directory)
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(k) - KNOWN
    if unknown:
        raise ValueError(f"{directory}: unsupported fields {sorted(unknown)}")
    docs = []
    for entry in k.get("resources", []):
        path = directory / entry
        if path.is_dir():
            docs += _with_local(path)
        else:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for patch in k.get("patches", []):
        target = patch["target"]
        ops = yaml.safe_load(patch["patch"])
        for doc in _selected(docs, target):
            for op in ops:
                _apply(doc, op)
    for rep in k.get("replacements", []):
        src = rep["source"]
        [source] = _selected(docs, src)
        value = _get(source, src["fieldPath"].split("."))
        for tgt in rep["targets"]:
            for doc in _selected(docs, tgt["select"]):
                for field_path in tgt["fieldPaths"]:
                    _set(doc, field_path.split("."), value)
    return [d for d in docs if not _is_local(d)]


def render_with_local(directory):
    """A base's resources, local-config ones included."""
    return _with_local(pathlib.Path(directory))


def _with_local(directory):
    """A base's resources, local-config ones kept for the overlay's
    replacements (kustomize drops them only from the final output)."""
    k = yaml.safe_load((directory / "kustomization.yaml").read_text())
    if set(k) - {"apiVersion", "kind", "resources"}:
        raise ValueError(f"{directory}: a base here lists resources only")
    docs = []
    for entry in k.get("resources", []):
        docs += [d for d in yaml.safe_load_all(
            (directory / entry).read_text()) if d]
    return docs


def _is_local(doc):
    notes = doc.get("metadata", {}).get("annotations") or {}
    return notes.get(LOCAL) == "true"


def _selected(docs, selector):
    found = [d for d in docs
             if d["kind"] == selector["kind"]
             and d["metadata"]["name"] == selector.get(
                 "name", d["metadata"]["name"])]
    if not found:
        raise ValueError(f"nothing matches {selector}")
    return found


def _pointer(path):
    return [p.replace("~1", "/").replace("~0", "~")
            for p in path.split("/")[1:]]


def _apply(doc, op):
    *parents, last = _pointer(op["path"])
    node = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    kind = op["op"]
    if kind not in ("add", "replace", "remove"):
        raise ValueError(f"unsupported JSON 6902 op {kind}")
    if isinstance(node, list):
        if kind == "add":
            index = len(node) if last == "-" else int(last)
            node.insert(index, copy.deepcopy(op["value"]))
        elif kind == "replace":
            node[int(last)] = copy.deepcopy(op["value"])
        else:
            del node[int(last)]
    elif kind == "remove":
        del node[last]
    else:
        if kind == "replace" and last not in node:
            raise ValueError(f"replace of missing {op['path']}")
        node[last] = copy.deepcopy(op["value"])


def _get(node, parts):
    for p in parts:
        node = node[p]
    return node


def _set(node, parts, value):
    head, rest = parts[0], parts[1:]
    if head == "*":
        for item in node:
            _set(item, rest, value)
        return
    if not rest:
        node[head] = copy.deepcopy(value)
        return
    _set(node[int(head)] if isinstance(node, list) else node[head], rest,
         value)
