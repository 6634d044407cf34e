#!/usr/bin/env bash
# The checks that need current PyTorch (2.x), which CI cannot run: Debian's
# python3-torch is 1.13. Run it on a machine whose python3 has PyTorch 2.x,
# from a checkout holding the static binaries built here:
#
#   bazel build //agent:distjob-agent //bench:stamp //bench:store_bench \
#       //workerstore:tcpstore_server_main
#   tests/device/check.sh OUTDIR [STEP...]
#
# STEPs (default: all, in this order), each bounded and writing its own
# files to OUTDIR (8 at most in all):
#   facts     facts.txt: the versions, the CPU count, 2.x torchrun's --help
#   sources   torch-src.tgz: the 2.x sources the agent follows (torchrun,
#             its elastic agent and rendezvous, TCPStore's protocol headers)
#   pytest    pytest.log: the TCPStore server, the workers' store, real DDP
#             through it, the worker environment against 2.x torchrun's
#             (envs.tgz: the environments both launchers gave)
#   probes    probes.log: a gloo job restarted once under 2.x torchrun and
#             under the agent (standalone and one-node static), and whether
#             NCCL_ASYNC_ERROR_HANDLING draws 2.x's deprecation warning
#   bench     bench.log, results.md, results.json: `bench/run.sh --only
#             worker_store` with 2.x clients against 2.x's own TCPStore
#   blackbox  the black-box suite with 2.x workers, appended to pytest.log
#             (a ninth file would not come back from the lent machine)
set -u
out=$(realpath "${1:?usage: tests/device/check.sh OUTDIR [STEP...]}")
shift
steps=${*:-facts sources pytest probes bench blackbox}
cd "$(dirname "$0")/../.."
export DISTJOB_PYTHON=${DISTJOB_PYTHON:-$(command -v python3)}
export PYTHONUNBUFFERED=1
py=$DISTJOB_PYTHON
agent=$PWD/bazel-bin/agent/distjob-agent
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

facts() {
  "$py" -c 'import sys, torch; print("torch", torch.__version__, "python", sys.version)'
  echo "cpus $(nproc)"; uname -a
  for b in agent/distjob-agent workerstore/tcpstore_server_main \
           bench/stamp bench/store_bench; do
    test -x "bazel-bin/$b" || echo "MISSING bazel-bin/$b"
  done
  "$py" -m torch.distributed.run --help
}

sources() {
  local td
  td=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  (cd "$td" && find distributed/run.py distributed/rendezvous.py \
      distributed/launcher distributed/elastic/agent \
      distributed/elastic/rendezvous distributed/elastic/utils \
      distributed/elastic/multiprocessing/errors \
      include/torch/csrc/distributed/c10d -name '*.py' -o -name 'TCPStore*' \
      | tar czf "$out/torch-src.tgz" -T -)
}

run_pytest() {
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
      test_same_worker_env*/agent)
}

# One launch of tests/device/restart_worker.py: its exit, time and output.
restart() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name: $*"
  timeout 60 "$@" 2>&1 | tail -n 8
  echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start)) s"
}

probes() {
  local w=tests/device/restart_worker.py port=$((29600 + RANDOM % 1000))
  restart "torchrun standalone" "$py" -m torch.distributed.run \
      --standalone --nproc-per-node 2 --max-restarts 1 "$w"
  restart "torchrun static" "$py" -m torch.distributed.run \
      --nproc-per-node 2 --max-restarts 1 --master-port "$port" "$w"
  restart "agent standalone" env DISTJOB_TERMINATION_LOG="$work/t1" \
      "$agent" run --standalone --nproc-per-node 2 --max-restarts 1 \
      --no-python "$py" "$w"
  restart "agent static" env DISTJOB_TERMINATION_LOG="$work/t2" \
      "$agent" run --nproc-per-node 2 --max-restarts 1 \
      --master-port "$((port + 1))" --no-python "$py" "$w"
  local nccl='import torch, torch.distributed as dist
torch.cuda.set_device(0)
dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
t = torch.ones(1, device="cuda"); dist.all_reduce(t)
dist.destroy_process_group(); print("nccl ok", t.item())'
  for v in TORCH_NCCL_ASYNC_ERROR_HANDLING NCCL_ASYNC_ERROR_HANDLING; do
    echo "== nccl with $v=1"
    env "$v=1" timeout 60 "$py" -c "$nccl" 2>&1 | tail -n 5
  done
}

bench() {
  DISTJOB_BENCH_OUT="$work/bench" timeout 260 "$py" bench/run.py \
      --only worker_store > "$out/bench.log" 2>&1
  echo "exit $?" >> "$out/bench.log"
  cp "$work/bench/results.md" "$work/bench/results.json" "$out/"
}

blackbox() {
  echo "== blackbox" >> "$out/pytest.log"
  timeout 120 "$py" -m pytest -p no:cacheprovider -ra -q -n 4 \
      --basetemp="$work/bb" tests/blackbox >> "$out/pytest.log" 2>&1
  echo "exit $?" >> "$out/pytest.log"
}

for step in $steps; do
  case $step in
    facts) facts > "$out/facts.txt" 2>&1 ;;
    sources) sources 2>> "$out/facts.txt" ;;
    pytest) run_pytest 2>> "$out/facts.txt" ;;
    probes) probes > "$out/probes.log" 2>&1 ;;
    bench) bench 2>> "$out/bench.log" ;;
    blackbox) blackbox ;;
    *) echo "unknown step $step (facts sources pytest probes bench" \
            "blackbox)" >&2; exit 2 ;;
  esac
done
