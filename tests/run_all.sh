#!/usr/bin/env bash
# The project's test command (README): the static binary as it ships and
# the black-box, integration and end-to-end suites against it; the unit
# tests and the malformed-input suites under ASan/UBSan; the fuzz targets.
# Extra arguments go to the main pytest run (e.g. -k NAME).
#
# The pytest suites mostly wait (on heartbeats, deadlines, peers: about a
# fifth of their wall time is CPU), so the sanitizer and fuzz builds run
# beside them at idle priority (SCHED_IDLE: only on CPU that nothing else
# wants, so no timing-bound test waits for a compiler), in output bases of
# their own (so that they never replace the objects of the binary the
# suites run). Their tests run once the suites are done.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, on stderr as it ends and all together at the end,
# so that where CI's time goes is in every log. A stage that overlaps
# another says so in its name.
work=$(mktemp -d)
timed() {  # timed NAME COMMAND...: COMMAND's exit status
  local name=$1 began=$SECONDS rc=0 line
  shift
  "$@" || rc=$?
  line=$(printf '%5ds  %s' $((SECONDS - began)) "$name")
  [ "$rc" = 0 ] || line="$line: failed (exit $rc)"
  echo "$line" >>"$work/stage_times"
  echo "run_all.sh: $line" >&2
  return "$rc"
}
started=$SECONDS
background=""
asan_base=${DISTJOB_ASAN_OUTPUT_BASE:-$HOME/.cache/distjob-agent-asan/$(pwd | md5sum | cut -c1-16)}
asan_bazel() { bazel --output_base="$asan_base" --max_idle_secs=900 "$@"; }
finish() {
  if [ -n "$background" ] && kill -0 "$background" 2>/dev/null; then
    # Its bazel clients cancel their builds on SIGINT.
    pkill -INT -P "$background" 2>/dev/null || true
    wait "$background" 2>/dev/null || true
  fi
  asan_bazel shutdown 2>/dev/null || true
  if [ -s "$work/stage_times" ]; then
    printf 'run_all.sh: stage times (%ds in all)\n' $((SECONDS - started)) >&2
    sed 's/^/  /' "$work/stage_times" >&2
  fi
  rm -rf "$work"
}
trap finish EXIT

# The static binary, as it ships, and every other binary (the tests use
# tcpstore_server_main; bench/ and fuzz/ must keep building). Not `bazel
# build //...`: that also builds each library's shared object, which nothing
# uses here, compiling all our code a second time (as PIC) and running LTO
# on each link.
timed "agent, static" bazel build //agent:distjob-agent
# On a line of its own: a failing query inside $(...) would not stop the
# script, and bazel given no targets builds nothing and succeeds.
# (The notices check only reads the link line of the extra-library twin.)
binaries=$(bazel query --noshow_progress \
  'kind(cc_binary, //...) except //agent:distjob-agent-extra-library')
timed "other binaries" bazel build $binaries
# The unit tests, named here: in another output base `//...` would also
# walk this tree's bazel-* links into the first one.
unit_tests=$(bazel query --noshow_progress \
  'tests(//...) except attr(tags, "manual", //...)')

# Sanitizers: the unit tests, and the dynamically linked twin of the agent
# (they cannot link into the static binary) for the suites that feed it
# malformed input, under AddressSanitizer + UndefinedBehaviorSanitizer;
# then the fuzz targets (clang, tests/run_fuzz.sh). Built in the background;
# a failure shows its log and fails the run.
sanitizer_builds() {
  chrt --idle --pid 0 "$BASHPID" 2>/dev/null || renice -n 19 -p "$BASHPID" >/dev/null
  timed "sanitizer build (beside pytest)" asan_bazel build --config=asan \
    --symlink_prefix=/ $unit_tests //agent:distjob-agent-dev
  timed "fuzz build (beside pytest)" tests/run_fuzz.sh --build-only
}
sanitizer_builds >"$work/sanitizer_builds.log" 2>&1 &
background=$!

# Debian's interpreter: it has python3-torch and python3-pytest.
timed "pytest suites" \
  /usr/bin/python3 -m pytest -p no:cacheprovider -ra --durations=30 tests "$@"

timed "waiting for the sanitizer builds" wait "$background" || {
  tail -n 80 "$work/sanitizer_builds.log" >&2
  echo "run_all.sh: the sanitizer or fuzz build failed (its log above)" >&2
  exit 1
}
background=""
timed "unit tests, ASan" asan_bazel test --config=asan --symlink_prefix=/ \
  $unit_tests
asan_bin=$(asan_bazel info --config=asan bazel-bin 2>/dev/null)
cp "$asan_bin/agent/distjob-agent-dev" "$work/distjob-agent"
DISTJOB_AGENT="$work/distjob-agent" timed "malformed input, ASan" \
  /usr/bin/python3 -m pytest -p no:cacheprovider -q tests/blackbox/test_cli.py \
  tests/integration/test_discovery_inputs.py
timed "fuzzing" tests/run_fuzz.sh  # every libFuzzer target, a minute in all (docs/testing.md: "Fuzzing")
