#!/usr/bin/env bash
# The project's test command (README): the unit tests and the malformed-input
# suites under ASan/UBSan, then the fuzz targets, and the black-box,
# integration and end-to-end suites against the built static binary. Extra
# arguments go to the last pytest run (e.g. -k NAME).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, on stderr as it ends and all together at the end,
# so that where CI's time goes is in every log.
stage_times=()
timed() {  # timed NAME COMMAND...
  local name=$1 began=$SECONDS
  shift
  "$@"
  stage_times+=("$(printf '%5ds  %s' $((SECONDS - began)) "$name")")
  echo "run_all.sh: ${stage_times[-1]}" >&2
}
asan_dir=""
finish() {
  [ -z "$asan_dir" ] || rm -rf "$asan_dir"
  [ ${#stage_times[@]} -eq 0 ] || printf 'run_all.sh: stage times\n%s\n' \
    "$(printf '  %s\n' "${stage_times[@]}")" >&2
}
trap finish EXIT

# Sanitizers first: the unit tests, and the suites that feed the agent
# malformed input, under AddressSanitizer + UndefinedBehaviorSanitizer.
# They cannot link into the static binary, so these run its dynamically
# linked twin, //agent:distjob-agent-dev.
timed "unit tests, ASan" bazel test --config=asan --build_tests_only //...
timed "agent, ASan" bazel build --config=asan //agent:distjob-agent-dev
asan_dir=$(mktemp -d)
cp bazel-bin/agent/distjob-agent-dev "$asan_dir/distjob-agent"
DISTJOB_AGENT="$asan_dir/distjob-agent" timed "malformed input, ASan" \
  /usr/bin/python3 -m pytest \
  -p no:cacheprovider -q tests/blackbox/test_cli.py \
  tests/integration/test_discovery_inputs.py

# Then the static binary, as it ships, and every other binary (the tests use
# tcpstore_server_main; bench/ and fuzz/ must keep building). Not `bazel
# build //...`: that also builds each library's shared object, which nothing
# uses here, compiling all our code a second time (as PIC) and running LTO
# on each link. The unit tests ran once, under the sanitizers above: running
# them again optimised compiled and linked every test a second time (about
# five minutes of CI) to find nothing the sanitizers miss; the optimised
# code is what the pytest suites below run.
timed "agent, static" bazel build //agent:distjob-agent
# On a line of its own: a failing query inside $(...) would not stop the
# script, and bazel given no targets builds nothing and succeeds.
# (The notices check only reads the link line of the extra-library twin.)
binaries=$(bazel query --noshow_progress \
  'kind(cc_binary, //...) except //agent:distjob-agent-extra-library')
timed "other binaries" bazel build $binaries
timed "fuzzing" tests/run_fuzz.sh  # every libFuzzer target, a minute in all (docs/testing.md: "Fuzzing")

# Debian's interpreter: it has python3-torch and python3-pytest.
timed "pytest suites" \
  /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=30 tests "$@"
