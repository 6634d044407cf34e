#!/usr/bin/env python3
"""THIRD_PARTY_NOTICES from what the static agent really links.

    tools/notices.py [--target LABEL] [--output FILE]   write the notices
    tools/notices.py --check [--target LABEL]           compare, exit 1 if stale

Where each library is found:
- the link line: `bazel aquery` of the target's CppLink action gives the
  arguments Bazel passes to the compiler driver; every -lNAME (resolved to
  libNAME.a, the link is -static), -l:FILE and absolute archive or object
  is a system file (pkg-config's flags: gRPC, Protobuf, Abseil, c-ares,
  OpenSSL, zlib, re2, libevent; Bazel's own -lstdc++ -lm);
- the compiler driver: what `gcc -static -###` adds by itself (crt*.o,
  -lgcc -lgcc_eh -lc: glibc and GCC's runtime);
- headers: libraries compiled in from their headers have no archive. The
  target's external repositories (`bazel query deps()`) name them, and
  HEADER_ONLY names a header of each (spdlog, fmt, nlohmann-json); an
  external repository this script does not know is an error, so a new
  header-only dependency cannot slip through either.
Each file is mapped to its Debian package with `dpkg -S`, and the notices
carry each package's /usr/share/doc/<package>/copyright.

The check (tests/test_notices.py) is a function of a target's link inputs
(`LinkInputs`): the agent's must match the committed file, and a twin
linked with one more library must not.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET = "//agent:distjob-agent"
NOTICES = ROOT / "THIRD_PARTY_NOTICES"

# External repositories compiled in from headers: a header of each library
# whose code they bring (spdlog brings fmt too; both are compiled once in
# //third_party:spdlog).
HEADER_ONLY = {
    "com_github_gabime_spdlog": ["/usr/include/spdlog/spdlog.h",
                                 "/usr/include/fmt/format.h"],
    "com_github_nlohmann_json": ["/usr/include/nlohmann/json.hpp"],
}
# External repositories whose libraries come as link flags
# (third_party/system_libs.bzl): the link line says what they bring.
LINKED = {"com_github_grpc_grpc", "com_google_protobuf", "com_google_absl",
          "com_github_cares", "com_github_libevent"}
# The build's own machinery: nothing of theirs is linked.
TOOLING = {"bazel_tools", "local_config_cc", "local_config_platform",
           "rules_cc", "rules_java", "platforms", "remote_coverage_tools"}

# Debian's copyright files refer to the full licence texts there; an image
# (or another distribution) may not have them, so the notices carry them.
COMMON_LICENSES = re.compile(r"/usr/share/common-licenses/([\w.+-]*[\w+])")

TITLE = "Third-party notices for distjob-agent"
LIST_HEADING = "Packages, and what each contributes:"
RULE = "=" * 72


class NoticesError(Exception):
    """A link input that cannot be accounted for."""


@dataclasses.dataclass
class LinkInputs:
    """What a target's final link is made of: the driver's argument vector
    (argv[0] is the driver) and the external repositories it depends on."""
    argv: list
    repos: set


def bazel(*args):
    r = subprocess.run(["bazel", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise NoticesError(f"bazel {' '.join(args)} failed:\n{r.stderr}")
    return r.stdout


def bazel_link_inputs(target=TARGET):
    out = json.loads(bazel("aquery", "--output=jsonproto",
                           "--include_param_files",
                           f'mnemonic("CppLink", {target})'))
    actions = out.get("actions", [])
    if len(actions) != 1:
        raise NoticesError(f"{target}: expected one link action, found "
                           f"{len(actions)}")
    argv = []
    for arg in actions[0]["arguments"]:
        if arg.startswith("@") and arg.endswith(".params"):
            # The link's arguments in a params file: aquery shows its
            # contents beside the action.
            argv += next(p["arguments"] for p in actions[0]["paramFiles"]
                         if p["execPath"] == arg[1:])
        else:
            argv.append(arg)
    repos = set()
    for line in bazel("query", "--noimplicit_deps", "--output=package",
                      f"deps({target})").split():
        if line.startswith("@"):
            repos.add(line[1:].split("//")[0])
    return LinkInputs(argv=argv, repos=repos)


def _resolve(driver, name, search):
    for d in search:
        candidate = os.path.join(d, name)
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    r = subprocess.run([driver, f"-print-file-name={name}"],
                       capture_output=True, text=True, check=True)
    found = r.stdout.strip()
    if not os.path.isabs(found) or not os.path.exists(found):
        raise NoticesError(f"{name}: not found by {driver} or in "
                           f"{search or 'no -L directory'}")
    return os.path.realpath(found)


def _library_file(driver, flag, search, static):
    """The file an -l flag names: -l:FILE, else libNAME.a (or .so when the
    link is not -static)."""
    name = flag[2:]
    if name.startswith(":"):
        return _resolve(driver, name[1:], search)
    if static:
        return _resolve(driver, f"lib{name}.a", search)
    try:
        return _resolve(driver, f"lib{name}.so", search)
    except NoticesError:
        return _resolve(driver, f"lib{name}.a", search)


def driver_implicit(driver, static):
    """The libraries and objects the compiler driver adds to every link."""
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "empty.o")
        pathlib.Path(obj).touch()
        args = [driver] + (["-static"] if static else []) + [
            "-###", "-o", os.path.join(tmp, "a.out"), obj]
        r = subprocess.run(args, capture_output=True, text=True)
    lines = [line for line in r.stderr.splitlines()
             if "collect2" in line or line.strip().startswith('"/')
             and obj in line]
    if not lines:
        raise NoticesError(f"{' '.join(args)}: no link line in its output")
    words = shlex.split(lines[-1])
    return ([w for w in words if w.startswith("-l")],
            [w for w in words if w.startswith("-L")],
            [os.path.realpath(w) for w in words
             if os.path.isabs(w) and w.endswith(".o") and w != obj])


def linked_files(inputs):
    """{absolute system file: what brought it}, for every library file the
    link reads and every header of a header-only library."""
    driver, args = inputs.argv[0], inputs.argv[1:]
    static = "-static" in args
    search = [a[2:] for a in args if a.startswith("-L") and len(a) > 2]
    files = {}
    for a in args:
        if a.startswith("-l"):
            files.setdefault(_library_file(driver, a, search, static), a)
        elif a == "-pthread":
            files.setdefault(_library_file(driver, "-lpthread", search,
                                           static), a)
        elif a.endswith((".a", ".o", ".so", ".lo")) and not a.startswith("-"):
            if os.path.isabs(a):
                files.setdefault(os.path.realpath(a), a)
            elif "/external/" in a:
                raise NoticesError(f"{a}: a library built from source; the "
                                   "notices come from Debian packages")
    flags, dirs, objects = driver_implicit(driver, static)
    implicit_search = search + [d[2:] for d in dirs]
    for f in flags:
        files.setdefault(_library_file(driver, f, implicit_search, static),
                         f"{f} (compiler driver)")
    for o in objects:
        files.setdefault(o, "(compiler driver)")
    for repo in sorted(inputs.repos - LINKED - TOOLING):
        if repo not in HEADER_ONLY:
            raise NoticesError(
                f"external repository @{repo}: tell tools/notices.py "
                "whether it is linked (LINKED) or header-only (HEADER_ONLY)")
        for header in HEADER_ONLY[repo]:
            files[header] = f"@{repo} (headers)"
    return files


def _dpkg_owners(paths):
    """{path: owning package} for those of `paths` dpkg knows, from one
    `dpkg -S` (each call reads dpkg's whole file database, a quarter of a
    second: one per file made a check of the agent's ~90 files take 20 s)."""
    if not paths:
        return {}
    r = subprocess.run(["dpkg", "-S", *paths], capture_output=True,
                       text=True)
    owners = {}
    for line in r.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        pkgs, _, path = line.partition(": ")
        owners.setdefault(path, pkgs.split(",")[0].strip().split(":")[0])
    return owners


def _owners(paths):
    """{path: owning package}; a /usr path dpkg does not know is looked up
    without /usr too (merged /usr: files a package installs under /lib)."""
    owners = _dpkg_owners(sorted(paths))
    unowned = [p for p in paths if p not in owners]
    short = {p[4:]: p for p in unowned if p.startswith("/usr/")}
    for path, pkg in _dpkg_owners(sorted(short)).items():
        owners[short[path]] = pkg
    for path in sorted(paths):
        if path not in owners:
            raise NoticesError(f"{path}: no Debian package owns it (dpkg -S)")
    return owners


def packages(files):
    """{Debian package: sorted names of its files the binary takes}."""
    owners = _owners(set(files))
    by = {}
    for path in files:
        name = (path[len("/usr/include/"):]
                if path.startswith("/usr/include/") else
                os.path.basename(path))
        by.setdefault(owners[path], set()).add(name)
    return {p: sorted(n) for p, n in sorted(by.items())}


def _list_lines(pkgs):
    lines = []
    for pkg, names in pkgs.items():
        lines += textwrap.wrap(" ".join(names), width=72,
                               initial_indent=f"  {pkg}: ",
                               subsequent_indent="    ",
                               break_on_hyphens=False)
    return lines


def parse_list(text):
    """The package list of a notices file, as packages() returns it."""
    lines = text.splitlines()
    try:
        start = lines.index(LIST_HEADING) + 1
    except ValueError:
        return {}
    pkgs, current = {}, None
    for line in lines[start:]:
        if line.startswith("    ") and current:
            pkgs[current] += line.split()
        elif line.startswith("  ") and ": " in line:
            current, _, rest = line.strip().partition(": ")
            pkgs[current] = rest.split()
        else:
            break
    return {p: sorted(n) for p, n in sorted(pkgs.items())}


def copyright_file(pkg):
    path = pathlib.Path("/usr/share/doc") / pkg / "copyright"
    if not path.is_file():
        raise NoticesError(f"{path}: missing; the notices need package "
                           f"{pkg}'s copyright file")
    return path


def render(pkgs, target=TARGET):
    # Packages of one source often share one copyright file: print it once.
    groups = {}
    for pkg in pkgs:
        groups.setdefault(copyright_file(pkg).resolve(), []).append(pkg)
    out = [TITLE, "=" * len(TITLE), ""]
    out += textwrap.wrap(
        "distjob-agent is licensed under the Apache License, Version 2.0 "
        "(LICENSE). Its static binary contains code of the Debian packages "
        "below: linked from their static archives, or compiled in from "
        "their headers. Each package's copyright and licence follow, as "
        "Debian records them in /usr/share/doc/<package>/copyright.",
        width=72)
    out += ["", f"Generated by tools/notices.py from the link of {target};",
            "do not edit: run tools/notices.py again when a dependency "
            "changes.", "", LIST_HEADING]
    out += _list_lines(pkgs)
    referenced = {}
    for path, names in groups.items():
        text = path.read_text(errors="replace")
        out += ["", RULE, ", ".join(names), f"  {path}", RULE, ""]
        out += text.rstrip("\n").splitlines()
        for name in COMMON_LICENSES.findall(text):
            licence = pathlib.Path("/usr/share/common-licenses") / name
            if licence.is_file():
                referenced.setdefault(licence.resolve(), set()).add(licence)
    for real, names in sorted(referenced.items()):
        out += ["", RULE, "Licence text referred to above as "
                + " and ".join(sorted(str(n) for n in names)), RULE, ""]
        out += real.read_text(errors="replace").rstrip("\n").splitlines()
    return "\n".join(out) + "\n"


def check(inputs, notices_text):
    """What the notices lack or hold in excess for a link: [] when they
    cover exactly what it takes."""
    want = packages(linked_files(inputs))
    have = parse_list(notices_text)
    problems = []
    for pkg in sorted(set(want) - set(have)):
        problems.append(f"{pkg} ({' '.join(want[pkg])}) is linked but has "
                        "no notice")
    for pkg in sorted(set(have) - set(want)):
        problems.append(f"{pkg} has a notice but is no longer linked")
    for pkg in sorted(set(want) & set(have)):
        if want[pkg] != have[pkg]:
            problems.append(f"{pkg}: the link takes {' '.join(want[pkg])}; "
                            f"the notices list {' '.join(have[pkg])}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", default=TARGET)
    parser.add_argument("--output", type=pathlib.Path, default=NOTICES)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    try:
        inputs = bazel_link_inputs(args.target)
        if args.check:
            problems = check(inputs, args.output.read_text())
            for p in problems:
                print(f"{args.output}: {p}", file=sys.stderr)
            if problems:
                print("run tools/notices.py to regenerate", file=sys.stderr)
            return 1 if problems else 0
        args.output.write_text(
            render(packages(linked_files(inputs)), args.target))
    except NoticesError as e:
        print(f"notices.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
