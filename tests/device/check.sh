#!/usr/bin/env bash
# The checks that need current PyTorch (2.x), which CI cannot run: Debian's
# python3-torch is 1.13. Run it on a machine whose python3 has PyTorch 2.x,
# from a checkout holding the static binaries built here:
#
#   bazel build //agent:distjob-agent //bench:stamp //bench:store_bench \
#       //rendezvous/store:tcpstore_server_main
#   tests/device/check.sh OUTDIR
#
# Each step is bounded, so the whole run ends within about 9 minutes, and
# writes one file to OUTDIR (8 in all):
#   facts.txt      the versions, the CPU count and 2.x torchrun's --help
#   torch-src.tgz  the 2.x sources the agent follows: torchrun, its elastic
#                  agent and rendezvous, TCPStore's protocol headers
#   pytest.log     the TCPStore server, the workers' store, real DDP through
#                  it, the worker environment against 2.x torchrun's
#   envs.tgz       the worker environments both launchers gave
#   bench.log, results.md, results.json
#                  `bench/run.sh --only worker_store` with 2.x clients
#                  against 2.x's own TCPStore (its libuv server)
#   blackbox.log   the black-box suite with 2.x workers
set -u
out=$(realpath "${1:?usage: tests/device/check.sh OUTDIR}")
cd "$(dirname "$0")/../.."
export DISTJOB_PYTHON=${DISTJOB_PYTHON:-$(command -v python3)}
export PYTHONUNBUFFERED=1
py=$DISTJOB_PYTHON
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

{
  "$py" -c 'import sys, torch; print("torch", torch.__version__, "python", sys.version)'
  echo "cpus $(nproc)"; uname -a
  for b in agent/distjob-agent rendezvous/store/tcpstore_server_main \
           bench/stamp bench/store_bench; do
    test -x "bazel-bin/$b" || echo "MISSING bazel-bin/$b"
  done
  "$py" -m torch.distributed.run --help
} > "$out/facts.txt" 2>&1

td=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
(cd "$td" && find distributed/run.py distributed/rendezvous.py \
    distributed/launcher distributed/elastic/agent \
    distributed/elastic/rendezvous distributed/elastic/utils \
    distributed/elastic/multiprocessing/errors \
    include/torch/csrc/distributed/c10d -name '*.py' -o -name 'TCPStore*' \
    | tar czf "$out/torch-src.tgz" -T -) 2>> "$out/facts.txt"

timeout 150 "$py" -m pytest -p no:cacheprovider -ra -v \
    --basetemp="$work/pt" \
    tests/integration/test_tcpstore_server.py \
    tests/integration/test_rendezvous_torchrun.py \
    tests/integration/test_worker_store_ddp.py \
    tests/integration/test_rendezvous_ddp.py \
    tests/blackbox/test_worker_store.py \
    tests/blackbox/test_ddp_example.py \
    tests/blackbox/test_torchrun_flags.py \
    tests/blackbox/test_as_torchrun.py > "$out/pytest.log" 2>&1
echo "exit $?" >> "$out/pytest.log"
(cd "$work/pt" && tar czf "$out/envs.tgz" test_same_worker_env*/torchrun \
    test_same_worker_env*/agent) 2>> "$out/facts.txt"

DISTJOB_BENCH_OUT="$work/bench" timeout 260 "$py" bench/run.py \
    --only worker_store > "$out/bench.log" 2>&1
echo "exit $?" >> "$out/bench.log"
cp "$work/bench/results.md" "$work/bench/results.json" "$out/" 2>> \
    "$out/bench.log"

timeout 120 "$py" -m pytest -p no:cacheprovider -ra -q -n 4 \
    --basetemp="$work/bb" tests/blackbox > "$out/blackbox.log" 2>&1
echo "exit $?" >> "$out/blackbox.log"
