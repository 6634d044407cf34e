"""THIRD_PARTY_NOTICES against what the static agent links.

tools/notices.py reads a target's link inputs (Bazel's link line, the
compiler driver's own libraries, the header-only repositories) and maps
them to Debian packages; these tests read the real targets' inputs with
`bazel aquery`/`query` (analysis only, nothing is built)."""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

import notices

# Built into every static C++ program, found without the link line naming
# them: glibc and GCC's runtime (compiler driver), and the header-only
# libraries (the target's external repositories).
ALWAYS = {"libc6-dev", "libgcc-12-dev", "libstdc++-12-dev", "libspdlog-dev",
          "libfmt-dev", "nlohmann-json3-dev"}


@pytest.fixture(scope="module")
def committed():
    return notices.NOTICES.read_text()


@pytest.fixture(scope="module")
def agent_inputs():
    return notices.bazel_link_inputs("//agent:distjob-agent")


def test_the_committed_notices_cover_exactly_the_agents_link(
        agent_inputs, committed):
    assert notices.check(agent_inputs, committed) == []
    listed = notices.parse_list(committed)
    assert ALWAYS <= set(listed)
    for pkg in ("libgrpc++-dev", "libprotobuf-dev", "libabsl-dev",
                "libc-ares-dev", "libssl-dev", "libevent-dev", "zlib1g-dev"):
        assert pkg in listed, pkg


def test_one_more_library_in_the_link_fails_the_check(committed):
    # A twin of the agent linked with -lcrypt (agent/BUILD.bazel).
    twin = notices.bazel_link_inputs("//agent:distjob-agent-extra-library")
    problems = notices.check(twin, committed)
    assert problems == ["libcrypt-dev (libcrypt.a) is linked but has no "
                        "notice"]


def test_every_listed_package_has_its_copyright_text(committed):
    for pkg in notices.parse_list(committed):
        text = notices.copyright_file(pkg).read_text(errors="replace")
        assert text.strip().splitlines()[0] in committed, pkg


def test_a_package_no_longer_linked_is_reported(agent_inputs, committed):
    listed = notices.parse_list(committed)
    listed["libcrypt-dev"] = ["libcrypt.a"]
    problems = notices.check(agent_inputs, notices.render(listed))
    assert problems == ["libcrypt-dev has a notice but is no longer linked"]


def test_an_unknown_external_repository_is_an_error():
    inputs = notices.LinkInputs(argv=["/usr/bin/gcc", "-static"],
                                repos={"com_example_vendored"})
    with pytest.raises(notices.NoticesError, match="com_example_vendored"):
        notices.linked_files(inputs)


def test_a_library_built_from_source_is_an_error():
    inputs = notices.LinkInputs(
        argv=["/usr/bin/gcc", "-static",
              "bazel-out/k8-opt/bin/external/foo/libfoo.a"], repos=set())
    with pytest.raises(notices.NoticesError, match="built from source"):
        notices.linked_files(inputs)
