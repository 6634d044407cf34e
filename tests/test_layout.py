"""The shape of the tree: packages by concern, no upward arrows, private
visibility by default, and the one map (docs/architecture.md) naming every
package and top-level folder that exists."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# What each package may depend on (docs/architecture.md, "Packages").
ALLOWED = {
    "common": {"third_party"},  # spdlog and fmt, compiled once
    "proto": {"third_party"},  # the cc_grpc_library macro
    "supervisor": {"common"},
    "discovery": {"common"},
    "launchers": {"discovery", "common"},
    "observability": {"common"},
    "workerstore": {"common"},
    "rendezvous/store": {"proto", "common"},
    "rendezvous": {"rendezvous/store", "proto", "common"},
    "agent/cli": {"supervisor", "discovery", "launchers", "rendezvous",
                  "rendezvous/store", "observability", "common"},
    "agent": {"agent/cli", "supervisor", "discovery", "launchers",
              "rendezvous", "rendezvous/store", "observability", "workerstore",
              "proto", "common"},
    "bench": {"rendezvous", "rendezvous/store", "common"},
    # The fuzz targets call every parser directly; nothing depends on them.
    "fuzz": {"agent", "agent/cli", "supervisor", "discovery", "launchers",
             "rendezvous", "rendezvous/store", "workerstore", "proto",
             "common"},
}

# Arrows the table must never gain, directly or through another package
# (issue 38): the workers' store is not the rendezvous' (one never needs the
# other's code), and what the job shows outside is not tied to how rounds
# form or how workers run.
NEVER_REACHES = {
    "rendezvous": {"workerstore"},
    "observability": {"rendezvous", "supervisor"},
}


def reaches(package):
    """Every package `package` depends on, directly or not."""
    seen, todo = set(), [package]
    while todo:
        for dep in ALLOWED.get(todo.pop(), set()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def under(package, root):
    return package == root or package.startswith(root + "/")


def packages():
    found = []
    for build in ROOT.rglob("BUILD.bazel"):
        rel = build.parent.relative_to(ROOT).as_posix()
        if rel == "." or rel.startswith(("third_party", "bazel-")):
            continue
        found.append(rel)
    return sorted(found)


def test_every_package_has_a_rule():
    assert sorted(ALLOWED) == packages()


@pytest.mark.parametrize("root", sorted(NEVER_REACHES))
def test_forbidden_arrows_stay_out_of_the_table(root):
    bad = [f"{package}/ reaches {dep}/"
           for package in ALLOWED if under(package, root)
           for dep in reaches(package)
           if any(under(dep, no) for no in NEVER_REACHES[root])]
    assert not bad


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_dependency_runs_upward(package):
    text = (ROOT / package / "BUILD.bazel").read_text()
    # Visibility lists name the users, not the dependencies.
    text = re.sub(r"visibility = \[[^\]]*\]", "", text)
    used = set(re.findall(r'"//([\w/]+):', text)) - {package}
    assert used <= ALLOWED[package], (
        f"{package}/ depends on {sorted(used - ALLOWED[package])}")


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_includes_follow_the_same_arrows(package):
    others = {p for p in ALLOWED if p != package}
    bad = []
    for src in (ROOT / package).glob("*.[hc]*"):
        for inc in re.findall(r'#include "([\w/]+)/[\w.]+"', src.read_text()):
            if inc in others and inc not in ALLOWED[package]:
                bad.append(f"{src.name} includes {inc}/")
    assert not bad


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_visibility_is_private_by_default(package):
    text = (ROOT / package / "BUILD.bazel").read_text()
    assert 'default_visibility = ["//visibility:private"]' in text
    assert "//visibility:public" not in text


def test_the_map_names_every_package():
    text = (ROOT / "docs/architecture.md").read_text()
    missing = [p for p in packages() if f"`{p}/`" not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_the_map_names_every_top_level_folder():
    # Folders without a BUILD file (deploy/, examples/, tools/...) too: the
    # map is the one place a newcomer looks a folder up.
    text = (ROOT / "docs/architecture.md").read_text()
    folders = [d.name for d in ROOT.iterdir()
               if d.is_dir() and not d.name.startswith((".", "bazel-"))
               and d.name not in ("dist", "__pycache__")]
    missing = sorted(f for f in folders if f"`{f}/`" not in text)
    assert not missing, f"docs/architecture.md does not name {missing}"


# A `(void)` on a call discards what it answers (issue 38, "no silent
# discards"): the comment on its line or the line above says why nothing
# depends on it. Fuzz targets call parsers only for what the sanitizers see.
VOID_CALL = re.compile(r"\(void\)\s*!?\s*[\w:.>\-\[\]]+\s*\(")


def uncommented_void_calls(rel, text):
    """`rel:line: code` for each `(void)` call in `text` with no comment on
    its line or the line before."""
    found, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        code = line.split("//")[0]
        if not VOID_CALL.search(code) or "//" in line:
            continue
        before = lines[i - 1].strip() if i else ""
        if before.startswith("//") or before.endswith("*/"):
            continue
        found.append(f"{rel}:{i + 1}: {line.strip()}")
    return found


def test_every_void_discard_says_why():
    found = []
    for path in sorted(ROOT.rglob("*.cc")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("bazel-", "third_party/", "tests/", "fuzz/")):
            continue
        if rel.endswith("_test.cc"):
            continue
        found += uncommented_void_calls(rel, path.read_text())
    assert not found, "a (void) with no comment saying why:\n" + "\n".join(
        found)


def test_the_discard_check_finds_a_planted_one():
    planted = "int F() {\n  int x = 0;\n  (void)store_->Set(key, \"1\");\n}\n"
    assert uncommented_void_calls("x.cc", planted) == [
        'x.cc:3: (void)store_->Set(key, "1");']
    said = planted.replace("  (void)", "  // Why.\n  (void)")
    assert uncommented_void_calls("x.cc", said) == []
    assert uncommented_void_calls("x.cc", "  (void)unused;\n") == []
