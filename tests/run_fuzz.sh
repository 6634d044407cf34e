#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ for a bounded time (docs/testing.md:
# "Fuzzing"), starting from its seed corpus in fuzz/corpus/<name>/, and
# fails on the first crash, leak, timeout or out-of-memory.
#
#   tests/run_fuzz.sh                   # a minute in all, as CI runs it
#                                       # (on two cores: half a minute)
#   tests/run_fuzz.sh 3600              # an hour in all (of target time)
#   tests/run_fuzz.sh 600 store_core    # ten minutes on one target
#
# The targets build with clang (--config=fuzz) in an output base of their
# own, so a fuzz run never rebuilds the gcc tree that the other tests use.
# New inputs go to a scratch directory (the committed corpus stays small);
# a crashing input is kept under $DISTJOB_FUZZ_ARTIFACTS.
set -euo pipefail
cd "$(dirname "$0")/.."

total=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(run_flags rdzv_conf volcano_peers framework_env error_file cgroup
           store_core tcpstore_frame tcpstore_waits h2_first_bytes timer_request
           rsh_args spawn_call)
fi
case "$total" in
  '' | *[!0-9]*) echo "run_fuzz.sh: SECONDS must be a whole number, got '$total'" >&2
                 exit 2 ;;
esac
per=$((total / ${#targets[@]}))
[ "$per" -ge 1 ] || per=1

out_base=${DISTJOB_FUZZ_OUTPUT_BASE:-$HOME/.cache/distjob-agent-fuzz/$(pwd | md5sum | cut -c1-16)}
artifacts=${DISTJOB_FUZZ_ARTIFACTS:-${TMPDIR:-/tmp}/distjob-fuzz-artifacts}
mkdir -p "$out_base" "$artifacts"
# The server of this output base exits a minute after the run.
fuzz_bazel() { bazel --output_base="$out_base" --max_idle_secs=60 "$@"; }

labels=()
for t in "${targets[@]}"; do
  [ -d "fuzz/corpus/$t" ] || { echo "run_fuzz.sh: no target '$t' (fuzz/corpus/$t)" >&2; exit 2; }
  labels+=("//fuzz:${t}_fuzzer")
done
fuzz_bazel build --config=fuzz --symlink_prefix=/ "${labels[@]}"
bin=$(fuzz_bazel info --config=fuzz bazel-bin 2>/dev/null)

work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# As many targets at a time as there are cores (two in CI): each still runs
# for its whole share on a core of its own, and the stage takes half as long.
parallel=$(nproc 2>/dev/null || echo 1)
fuzz_one() {  # fuzz_one TARGET: its log and exit status in $work
  local t=$1 rc=0
  mkdir -p "$work/$t"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb bounds the
  # whole process on the shared machine.
  "$bin/fuzz/${t}_fuzzer" -max_total_time="$per" -rss_limit_mb=2048 \
      -timeout=10 -max_len=4096 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$t-" "$work/$t" "fuzz/corpus/$t" \
      >"$work/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  echo "== fuzz/$t: ${per}s"
  if [ "$(cat "$work/$t.rc")" != 0 ]; then
    tail -n 60 "$work/$t.log" >&2
    echo "run_fuzz.sh: fuzz/$t failed; the input is in $artifacts/ (replay:" \
         "$bin/fuzz/${t}_fuzzer FILE). Fix the parser, add a unit test beside" \
         "it, and keep the input as fuzz/corpus/$t/crash-NAME." >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$work/$t.log" || true
done
echo "run_fuzz.sh: ${#targets[@]} targets, ${per}s each, no crash"
