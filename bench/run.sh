#!/usr/bin/env bash
# Regenerates docs/bench/ from a clean clone: builds the agent and the stamp
# worker, then runs every benchmark against both launchers.
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build //agent:distjob-agent //bench:stamp //bench:store_bench \
  //bench:rank_sim
exec /usr/bin/python3 bench/run.py "$@"
