"""Profiles the store while N simulated nodes form one round: the scale
benchmark of bench/run.py (one `store_bench server`, N real
DynamicRendezvous joins in `store_bench scale` processes) with `perf record`
attached to the store's process for the join.

    bench/profile_scale.py N [--cap SECONDS]

Prints the close time and the store's hottest symbols (`perf report`,
self time) and writes them to docs/bench/profile-scale-N.txt; the raw
profile is left in docs/bench/perf-scale-N.data (not committed). Needs Debian's linux-perf and the build of bench/run.sh.
"""

import argparse
import contextlib
import subprocess
import sys

import run


@contextlib.contextmanager
def perf_record(pid, out):
    perf = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-o",
                             str(out), "-p", str(pid)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        perf.send_signal(2)  # SIGINT: perf writes its file and exits
        perf.wait(timeout=60)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("n", type=int)
    parser.add_argument("--cap", type=float, default=120.0)
    args = parser.parse_args()
    out = run.OUT / f"perf-scale-{args.n}.data"
    run.OUT.mkdir(parents=True, exist_ok=True)
    measured = run.scale_once(args.n, args.cap,
                              lambda pid: perf_record(pid, out))
    if measured is None:
        head = f"{args.n} nodes: no round within {args.cap:.0f} s"
    else:
        reports = measured[0]
        close = (max(r["done_ns"] for r in reports) -
                 min(r["start_ns"] for r in reports)) / 1e9
        head = (f"{args.n} nodes: round closed in {close:.3f} s; store CPU "
                f"{measured[1]:.2f} s during the join")
    report = subprocess.run(
        ["perf", "report", "-i", str(out), "--no-children", "--stdio",
         "--percent-limit", "2", "-g", "none", "--sort", "symbol"],
        capture_output=True, text=True)
    lines = [l.rstrip(" -") for l in report.stdout.splitlines()
             if l.strip() and not l.startswith("#")]
    text = "\n".join([f"$ bench/profile_scale.py {args.n}", head,
                      "store process, self time by symbol (perf):"] +
                     lines[:25]) + "\n"
    (run.OUT / f"profile-scale-{args.n}.txt").write_text(text)
    print(text, end="")
    return 0 if measured is not None else 1


if __name__ == "__main__":
    sys.exit(main())
