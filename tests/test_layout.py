"""The shape of the tree: packages by concern, no upward arrows, private
visibility by default, the one map (docs/architecture.md) naming every
package and top-level folder that exists, and the size budgets of the C++
that ships (functions, files, mutexes per class)."""
import functools
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
    "rendezvous/store/etcd": {"rendezvous/store", "proto", "common"},
    "rendezvous/store/server": {"rendezvous/store", "proto", "common"},
    "rendezvous": {"rendezvous/store", "proto", "common"},
    # The elastic rendezvous, with its factory (c10d_rendezvous: over the
    # gRPC store, hosted or joined, or etcd) and its benchmark.
    "rendezvous/dynamic": {"rendezvous", "rendezvous/store",
                           "rendezvous/store/etcd", "rendezvous/store/server",
                           "common"},
    # The MPI spawn server: the supervisor's process start, the store's
    # token check, credentials and connection limiter.
    "spawn": {"supervisor", "rendezvous/store", "rendezvous/store/server",
              "proto", "common"},
    "agent/cli": {"supervisor", "discovery", "launchers", "rendezvous",
                  "rendezvous/store", "rendezvous/store/etcd", "observability",
                  "common"},
    "agent": {"agent/cli", "supervisor", "discovery", "launchers",
              "rendezvous", "rendezvous/dynamic", "rendezvous/store",
              "rendezvous/store/etcd",
              "rendezvous/store/server", "observability", "workerstore",
              "spawn", "proto", "common"},
    "bench": {"rendezvous", "rendezvous/dynamic", "rendezvous/store",
              "rendezvous/store/etcd", "rendezvous/store/server", "common"},
    # The fuzz targets call every parser directly; nothing depends on them.
    "fuzz": {"agent", "agent/cli", "supervisor", "discovery", "launchers",
             "rendezvous", "rendezvous/store", "rendezvous/store/server",
             "workerstore", "spawn", "proto", "common"},
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


# Size budgets (issue 38): no function over 80 lines, no source file over
# 1,000 lines, no class with more than two mutexes, in the C++ that ships
# (test code, third_party/ and fuzz/ aside). Each list below is a ratchet:
# an entry may shrink, never grow, and is removed once back within budget.
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 1000
MAX_MUTEXES = 2

# Declarative flag tables: one flags->Add per flag, long because the command
# line is; splitting them would scatter the flags, not simplify them.
FLAG_TABLES = {
    "AddCheckFlags",
    "AddCurrentTorchrunFlags",
    "AddDiscoveryFlags",
    "AddObservabilityFlags",
    "AddPreflightFlags",
    "AddSecurityFlags",
    "AddSourceFlags",
    "AddSupervisorFlags",
    "AddTlsFlags",
    "AddTorchrunFlags",
}

# Ratchets, empty since issue 38 paid its debts: an entry lets one named
# offender stay at its size until it shrinks. Functions by qualified name
# (lines from signature to closing brace), files by path (lines), classes
# by qualified name (absl::Mutex / std::*mutex members).
OVER_BUDGET = {}
FILES_OVER_BUDGET = {}
MUTEXES_OVER_BUDGET = {}

# Comments, string and character literals and preprocessor lines, so that
# the braces counted are code's. A number's digits may be split by ' (C++14).
_NOT_CODE = re.compile(
    r"""(?P<number>(?<![\w.])\.?\d(?:[\w.]|'(?=\w)|[eEpP][+-])*)
      | (?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<raw>R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")
      | (?P<string>"(?:\\.|[^"\\\n])*")
      | (?P<char>'(?:\\.|[^'\\\n])*')
      | (?P<directive>^[ \t]*\#(?:\\\n|[^\n])*)""",
    re.S | re.M | re.X)


def code_only(text):
    """`text` with comments, literals and directives blanked: line breaks
    kept (line numbers hold), a string left as "" and a character as 0."""

    def blank(m):
        breaks = "\n" * m.group().count("\n")
        if m.lastgroup in ("raw", "string"):
            return '""' + breaks
        if m.lastgroup == "char":
            return "0"
        if m.lastgroup == "number":
            return m.group()
        return " " + breaks

    return _NOT_CODE.sub(blank, text)


_ACCESS = re.compile(r"^\s*(?:(?:public|protected|private)\s*:(?!:)\s*)+")
_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype",
             "alignas", "alignof", "void", "int", "bool", "char", "auto",
             "noexcept", "static_assert", "typeid", "catch", "new", "delete",
             "__attribute__"}
# A function's name and the parenthesis that opens its parameters.
_FUNCTION_NAME = re.compile(
    r"(?<![\w:~])(?P<name>(?:\w+(?:<[^<>;{}()]*>)?\s*::\s*)*"
    r"(?:operator\s*(?:\(\s*\)|[^\s\w(]+|\w[\w\s:*&<>]*?)|~?\w+))\s*\(")
_CLASS_HEAD = re.compile(r"\s*(?:typedef\s+)?(class|struct|union|enum)\b")
_MUTEX_MEMBER = re.compile(
    r"\s*(?:(?:mutable|static|inline)\s+)*"
    r"(?:absl::Mutex|std::(?:recursive_|shared_|timed_|recursive_timed_|"
    r"shared_timed_)?mutex)\s+(?P<names>\w.*)", re.S)


def _drop_template_prefix(head):
    """`head` without a leading `template <...>`, whose angle brackets nest
    and whose defaults (`= int`) are no initializer."""
    m = re.match(r"\s*template\s*<", head)
    if not m:
        return head
    depth, i = 1, m.end()
    while i < len(head) and depth:
        depth += {"<": 1, ">": -1}.get(head[i], 0)
        i += 1
    return _drop_template_prefix(head[i:])


def _top_level_count(text, char):
    """How often `char` occurs in `text` outside (), [] and {}."""
    depth, count = 0, 0
    for c in text:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == char and depth == 0:
            count += 1
    return count


def _closing_paren(text, i):
    """The index of the `)` that closes the `(` at `text[i]`."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j
    return len(text)


def _class_name(head):
    """The name a class head declares: `class X final : public Y` is X,
    `class ABSL_LOCKABLE Outer::Impl` is Outer::Impl."""
    m = _CLASS_HEAD.match(head)
    rest = re.split(r"(?<!:):(?!:)", head[m.end():])[0]
    rest = re.sub(r"\bclass\b|\bfinal\b|\[\[.*?\]\]|\w+\s*\([^()]*\)", " ",
                  rest)
    names = re.findall(r"\w+(?:\s*::\s*\w+)*", rest)
    return re.sub(r"\s+", "", names[-1]) if names else "(anonymous)"


def classify(head):
    """What a `{` at namespace or class scope opens, from the code since
    the last `;`, `{` or `}`: ("namespace" | "class" | "function" | "init",
    name)."""
    head = _drop_template_prefix(_ACCESS.sub("", head))
    if re.match(r"\s*(?:inline\s+)?namespace\b|\s*extern\s*\"\"\s*$", head):
        return "namespace", ""
    if _CLASS_HEAD.match(head):
        return "class", _class_name(head)
    if head.count("(") > head.count(")"):
        return "init", ""  # `F(Options o = {`, `T x(U{`: inside parentheses
    for m in _FUNCTION_NAME.finditer(head):
        name = re.sub(r"\s+", "", m.group("name"))
        if name.split("::")[-1] in _KEYWORDS:
            continue
        if _top_level_count(head[:m.start()], "="):
            break  # `T x = F(...) {`: an initializer, not a definition
        after = head[_closing_paren(head, m.end() - 1) + 1:].rstrip()
        if re.search(r"(?<!:):(?!:)", after) and re.search(r"[\w>]$", after):
            break  # `F() : a_(1), b_{`: a member's initializer opens
        return "function", name
    return "init", ""


class Scan:
    """The functions, classes and mutex members of one C++ source: each
    function with its first line (where its signature starts) and last line
    (its closing brace); lambdas and local classes count toward the function
    they are written in."""

    def __init__(self, text):
        self.functions = []  # (qualified name, first line, last line)
        self.mutexes = {}  # qualified class name -> mutex members
        code = code_only(text)
        stack = []  # (kind, qualified name, first line)
        start = 0  # where the statement being read began
        for m in re.finditer(r"[{};]", code):
            c, pos = m.group(), m.start()
            opaque = any(k in ("function", "init") for k, _, _ in stack)
            if c == ";" and not opaque:
                if stack and stack[-1][0] == "class":
                    self._member(stack[-1][1], code[start:pos])
                start = pos + 1
            elif c == "{" and opaque:
                stack.append(("block", "", 0))
            elif c == "{":
                stack.append(self._open(stack, code, start, pos))
                if stack[-1][0] != "init":
                    start = pos + 1
            elif c == "}" and stack:
                kind, name, first = stack.pop()
                if kind == "function":
                    last = code.count("\n", 0, pos) + 1
                    self.functions.append((name, first, last))
                # A brace-initialized member (`: a_{1} {`, `int x_{0};`)
                # is part of the statement it is in.
                if kind not in ("init", "block"):
                    start = pos + 1

    def _open(self, stack, code, start, pos):
        head = code[start:pos]
        signature = _ACCESS.sub("", head).lstrip()
        first = code.count("\n", 0, pos - len(signature)) + 1
        kind, name = classify(signature)
        outer = [n for k, n, _ in stack if k == "class"]
        if outer and kind in ("class", "function"):
            name = outer[-1] + "::" + name
        if kind == "class":
            self.mutexes.setdefault(name, 0)
        return kind, name, first

    def _member(self, cls, decl):
        m = _MUTEX_MEMBER.match(_ACCESS.sub("", decl))
        if m:
            self.mutexes[cls] += 1 + _top_level_count(m.group("names"), ",")


@functools.lru_cache(maxsize=None)
def shipped_sources():
    """Every non-test C++ source and header, by path relative to the root:
    not in a cc_test or testonly target, nor under third_party/ or fuzz/."""
    test_files = set()
    for build in ROOT.rglob("BUILD.bazel"):
        rel = build.parent.relative_to(ROOT).as_posix()
        for rule in re.finditer(r"^(\w+)\((.*?)^\)", build.read_text(),
                                re.M | re.S):
            if rule.group(1) == "cc_test" or re.search(
                    r"testonly\s*=\s*True", rule.group(2)):
                test_files |= {f"{rel}/{name}" for name in re.findall(
                    r'"([\w/.-]+\.(?:cc|h))"', rule.group(2))}
    found = []
    for path in sorted(ROOT.rglob("*.[ch]*")):
        rel = path.relative_to(ROOT).as_posix()
        if path.suffix not in (".cc", ".h") or rel.startswith(
                ("bazel-", "third_party/", "fuzz/", "tests/")):
            continue
        if rel not in test_files and not rel.endswith("_test.cc"):
            found.append((rel, path.read_text()))
    return found


def function_sizes(sources):
    """(qualified name, lines from signature to closing brace, path:line)
    for every function defined in `sources`, (path, text) pairs."""
    return [(name, last - first + 1, f"{rel}:{first}")
            for rel, text in sources
            for name, first, last in Scan(text).functions]


def file_sizes(sources):
    return [(rel, len(text.splitlines()), rel) for rel, text in sources]


def mutex_counts(sources):
    """(qualified class name, mutex members, path) for every class."""
    return [(name, count, rel) for rel, text in sources
            for name, count in Scan(text).mutexes.items()]


def budget_problems(measured, budget, listed):
    """What breaks a budget with its ratchet, from (name, size, where)
    triples: a size over `budget` that `listed` does not allow, a listed
    one that grew, and a listed name no longer over budget (its entry must
    go, so that it cannot grow back unseen)."""
    problems, over = [], set()
    for name, size, where in measured:
        if size <= budget:
            continue
        over.add(name)
        said = name if where == name else f"{where}: {name}"
        if name not in listed:
            problems.append(f"{said} is {size} (budget {budget})")
        elif size > listed[name]:
            problems.append(f"{said} grew to {size} (listed at "
                            f"{listed[name]}; budget {budget})")
    problems += [f"{name} is no longer over {budget}: remove its entry"
                 for name in sorted(set(listed) - over)]
    return problems


def top_five(measured):
    ranked = sorted(measured, key=lambda m: -m[1])[:5]
    return "\n".join(
        f"  {size:5} {name}" + (f" ({where})" if where != name else "")
        for name, size, where in ranked)


def long_functions(sources):
    """function_sizes, the flag tables left out."""
    return [m for m in function_sizes(sources) if m[0] not in FLAG_TABLES]


def test_no_function_grows_past_its_budget():
    sizes = long_functions(shipped_sources())
    longest = top_five(sizes)
    print(f"\nlongest functions outside the flag tables:\n{longest}")
    problems = budget_problems(sizes, MAX_FUNCTION_LINES, OVER_BUDGET)
    assert not problems, "\n".join(
        problems + ["longest outside the flag tables:", longest])


def test_every_flag_table_listed_exists():
    defined = {name for name, _, _ in function_sizes(shipped_sources())}
    assert not sorted(set(FLAG_TABLES) - defined)


def test_no_file_grows_past_its_budget():
    sizes = file_sizes(shipped_sources())
    print(f"\nlongest files:\n{top_five(sizes)}")
    problems = budget_problems(sizes, MAX_FILE_LINES, FILES_OVER_BUDGET)
    assert not problems, "\n".join(problems)


def test_no_class_gains_a_mutex_past_its_budget():
    counts = mutex_counts(shipped_sources())
    print(f"\nclasses with the most mutexes:\n{top_five(counts)}")
    problems = budget_problems(counts, MAX_MUTEXES, MUTEXES_OVER_BUDGET)
    assert not problems, "\n".join(problems)


# Braces the scanner must not count (in literals, comments, directives),
# and the shapes a definition takes: lambdas, a namespace, a class with
# inline methods, a nested class, initializer lists with braces.
PLANTED = r"""#include "a.h"
#define BLOCK { {
namespace distjob {
namespace {

constexpr int kMax = 1'000 + '{';
const char* kOpen = "{ \" {";
const char kClose = '}';
const std::vector<int> kTable = {1, 2, 3};
const char* kRaw = R"json({"a": {)json";
const char* kQuote = R"(one " {)";
const std::function<void()> kHook = [] { Run(); };

/* { a comment
   { */
int Small(int x) {  // {{
  return x + '{';
}

template <typename T = int>
T Lambdas(T x) {
  auto f = [&](int y) {
    return y + x;
  };
  return f(1);
}

}  // namespace

class ABSL_LOCKABLE Outer final : public Base {
 public:
  Outer() : a_{1}, b_(2) {}
  int Inline() const {
    return a_;
  }
  struct Inner {
    void Method() {
      if (true) {
      }
    }
  };
  bool operator()(int x) const { return x > 0; }

 private:
  int a_{0};
  int b_ = 0;
};

Outer::Outer(int a)
    : a_{a},
      b_(a) {
  Check();
}

void Defaults(Options o = {}, int n = int{3}) {
  Use(o, n);
}

extern "C" int CEntry(void) {
  return 0;
}

}  // namespace distjob
"""


def test_the_scanner_finds_each_definition_of_a_planted_source():
    assert Scan(PLANTED).functions == [
        ("Small", 16, 18),
        ("Lambdas", 20, 26),
        ("Outer::Outer", 32, 32),
        ("Outer::Inline", 33, 35),
        ("Outer::Inner::Method", 37, 40),
        ("Outer::operator()", 42, 42),
        ("Outer::Outer", 49, 53),
        ("Defaults", 55, 57),
        ("CEntry", 59, 61),
    ]


def planted_function(name, lines):
    body = "".join(f"  x += {i};  // {{\n" for i in range(lines - 3))
    return f"int {name}(int x) {{\n{body}  return x;\n}}\n"


def test_the_function_budget_fails_on_a_planted_long_function():
    at_budget = planted_function("AtBudget", MAX_FUNCTION_LINES)
    over = planted_function("Over", MAX_FUNCTION_LINES + 1)
    table = planted_function("AddTorchrunFlags", 3 * MAX_FUNCTION_LINES)
    sources = [("x.cc", at_budget + over + table)]
    assert budget_problems(long_functions(sources), MAX_FUNCTION_LINES,
                           {}) == ["x.cc:81: Over is 81 (budget 80)"]


def test_the_ratchet_fails_on_growth_and_on_a_stale_entry():
    measured = [("Grew", 91, "x.cc:1"), ("Shrank", 85, "x.cc:2"),
                ("Fixed", 80, "x.cc:3")]
    listed = {"Grew": 90, "Shrank": 90, "Fixed": 90, "Gone": 90}
    assert budget_problems(measured, 80, listed) == [
        "x.cc:1: Grew grew to 91 (listed at 90; budget 80)",
        "Fixed is no longer over 80: remove its entry",
        "Gone is no longer over 80: remove its entry",
    ]


def test_the_file_budget_fails_on_a_planted_long_file():
    sources = [("long.cc", "int x;\n" * (MAX_FILE_LINES + 1)),
               ("ok.cc", "int x;\n" * MAX_FILE_LINES)]
    assert budget_problems(file_sizes(sources), MAX_FILE_LINES, {}) == [
        "long.cc is 1001 (budget 1000)"]


def test_the_mutex_budget_fails_on_a_planted_class():
    planted = """
class Three {
  // absl::Mutex in_a_comment_;
  const char* s_ = "absl::Mutex in_a_string_;";
  absl::Mutex* not_a_member_;
  mutable absl::Mutex a_;
  std::mutex b_, c_;
  void F() {
    absl::Mutex local;
  }
};
class Two {
  struct Shard {
    absl::Mutex mu;
  };
  absl::Mutex a_;
  std::shared_mutex b_ ABSL_ACQUIRED_AFTER(a_);
};
"""
    counts = mutex_counts([("x.h", planted)])
    assert sorted(counts) == [("Three", 3, "x.h"), ("Two", 2, "x.h"),
                              ("Two::Shard", 1, "x.h")]
    assert budget_problems(counts, MAX_MUTEXES, {}) == [
        "x.h: Three is 3 (budget 2)"]
