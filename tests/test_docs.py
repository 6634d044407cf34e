"""The documentation holds together: every relative link (and #anchor) in
the README and docs/ leads somewhere, and every option the built binary's
help lists is in the command-line reference, docs/cli.md (issue 38, item 5).

Anchors are GitHub's: a heading's text, lower-cased, punctuation but `-`
and `_` dropped, spaces as `-`, and `-1`, `-2`... on repeated headings."""
import os
import pathlib
import re
import subprocess

import pytest

from harness import agent_binary

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLI_REFERENCE = ROOT / "docs" / "cli.md"

# The subcommands whose options docs/cli.md lists (`completion` has none).
SUBCOMMANDS = ["run", "env", "status", "health", "preflight", "install"]

INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*\b(?:href|src)=\"([^\"]+)\"")
HTML_ANCHOR = re.compile(r"<a\b[^>]*\b(?:name|id)=\"([^\"]+)\"")


def documents():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def prose_lines(path):
    """(line number, text) of a Markdown file outside fenced code blocks,
    with inline code spans removed (a link label may hold code; its
    target never does)."""
    fence = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        marker = re.match(r"^\s{0,3}(```|~~~)", line)
        if marker:
            if fence is None:
                fence = marker.group(1)
            elif marker.group(1) == fence:
                fence = None
            continue
        if fence is None:
            yield number, re.sub(r"`+[^`]*`+", "``", line)


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's label
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """Every #anchor a Markdown file offers on GitHub."""
    found, seen = set(), {}
    fence = None
    for line in path.read_text().splitlines():
        marker = re.match(r"^\s{0,3}(```|~~~)", line)
        if marker:
            fence = None if fence == marker.group(1) else (fence or marker.group(1))
            continue
        if fence is not None:
            continue
        found.update(HTML_ANCHOR.findall(line))
        heading = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path):
    for number, line in prose_lines(path):
        targets = INLINE_LINK.findall(line) + HTML_LINK.findall(line)
        ref = REFERENCE_DEF.match(line)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            yield number, target


def broken_links(path):
    """'FILE:LINE: TARGET (why)' for each relative link of `path` that does
    not resolve."""
    bad = []
    for number, target in links(path):
        if re.match(r"^[a-zA-Z][\w+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif ROOT not in dest.parents and dest != ROOT:
            bad.append(f"{where} (outside the repository)")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{where} (no heading #{anchor} in "
                       f"{dest.relative_to(ROOT)})")
    return bad


@pytest.mark.parametrize("doc", [d.relative_to(ROOT).as_posix()
                                 for d in documents()])
def test_every_relative_link_resolves(doc):
    bad = broken_links(ROOT / doc)
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_the_link_check_sees_links():
    # The README links every topic page; a parser that found none would
    # pass every document above.
    targets = {t for _, t in links(ROOT / "README.md")}
    assert "docs/cli.md" in targets


def help_options(binary, subcommand):
    """Every option name (`--nnodes`, `-m`) `distjob-agent SUBCOMMAND
    --help` lists: its option lines are indented two spaces, their
    descriptions six."""
    out = subprocess.run([binary, subcommand, "--help"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    names = set()
    for line in out.stdout.splitlines():
        spec = re.match(r"^  (-\S.*)$", line)
        if spec:
            names.update(re.findall(r"(?:^|, )(--?[A-Za-z][\w-]*)",
                                    spec.group(1)))
    return names


@pytest.mark.parametrize("subcommand", SUBCOMMANDS)
def test_every_option_of_the_help_is_in_the_reference(subcommand):
    binary = agent_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} is not built (bazel build //agent:distjob-agent, "
                    "or set DISTJOB_AGENT): docs/cli.md's coverage of "
                    f"`{subcommand} --help` is not checked")
    names = help_options(binary, subcommand)
    assert names, f"no option found in `{subcommand} --help`"
    reference = CLI_REFERENCE.read_text()
    missing = sorted(n for n in names
                     if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])",
                                      reference))
    assert not missing, (f"docs/cli.md does not list these options of "
                         f"`distjob-agent {subcommand} --help`: {missing}")
