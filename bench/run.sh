#!/usr/bin/env bash
# Regenerates docs/bench/ from a clean clone: builds the agent and the stamp
# worker, then runs every benchmark against both launchers.
#
# DISTJOB_AGENT names an agent binary built elsewhere (a release's, or
# main's while this checkout builds something else), measured as it is:
# the agent is then not built here. store_bench (most of the agent's code)
# and rank_sim are built only when a section that runs them does.
set -euo pipefail
cd "$(dirname "$0")/.."
only=all
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
    --only) j=$((i + 1)); only="${!j:-}" ;;
    --only=*) only="${!i#--only=}" ;;
  esac
done
wants() {  # wants SECTION...: whether the run includes one of them
  [ "$only" = all ] && return 0
  local s
  for s in "$@"; do
    [[ ",$only," == *",$s,"* ]] && return 0
  done
  return 1
}
targets=(//bench:stamp)
[ -n "${DISTJOB_AGENT:-}" ] || targets+=(//agent:distjob-agent)
if wants store scale recover etcd; then targets+=(//bench:store_bench); fi
if wants worker_store_scale worker_store_allgather; then
  targets+=(//bench:rank_sim)
fi
bazel build "${targets[@]}"
exec /usr/bin/python3 bench/run.py "$@"
