"""Profiles the store while N simulated nodes form one round: the scale
benchmark of bench/run.py (one `store_bench server`, N real
DynamicRendezvous joins in `store_bench scale` processes) with `perf record`
attached to the store's process for the join.

    bench/profile_scale.py N [--cap SECONDS] [--clients]

Prints the close time and the store's hottest symbols (`perf report`,
self time) and writes them to docs/bench/profile-scale-N.txt; the raw
profile is left in docs/bench/perf-scale-N.data (not committed). With
--clients, perf records the whole machine (`perf record -a`: needs root or
kernel.perf_event_paranoid <= 0) and reports the simulated nodes'
processes instead (written to docs/bench/profile-scale-N-clients.txt), with
the CPU time of the store and of the simulated nodes during the join, and
their most threads. Needs Debian's linux-perf and the build of
bench/run.sh. perf's own errors are printed when its report is empty.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import threading

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


def simulators(server_pid):
    """The store_bench scale processes this one started (all but the store)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == server_pid:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and comm == "store_bench":
            found.append(int(entry))
    return found


def threads(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Split:
    """CPU of the store and of the simulated nodes over the join, the most
    threads a simulated node's process had, and perf on the clients."""

    def __init__(self, out):
        self.out = out
        self.store_cpu = self.sims_cpu = 0.0
        self.most_threads = 0
        self.sims = []
        self.perf = None

    @contextlib.contextmanager
    def around(self, server_pid):
        self.sims = simulators(server_pid)
        # The whole machine, reported for the simulators' pids (main):
        # `perf record -p` opens events for each of their thousands of
        # threads and recorded a few dozen samples in all.
        perf = subprocess.Popen(
            ["perf", "record", "-a", "-F", "499", "-g", "-o", str(self.out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.perf = perf
        done = threading.Event()

        def sample():
            while not done.wait(0.2):
                self.most_threads = max([self.most_threads] +
                                        [threads(p) for p in self.sims])

        sampler = threading.Thread(target=sample)
        sampler.start()
        store0 = run.cpu_seconds(server_pid)
        sims0 = sum(run.cpu_seconds(p) for p in self.sims)
        try:
            yield
        finally:
            self.store_cpu = run.cpu_seconds(server_pid) - store0
            self.sims_cpu = sum(run.cpu_seconds(p) for p in self.sims) - sims0
            done.set()
            sampler.join()
            perf.send_signal(2)
            perf.wait(timeout=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("n", type=int)
    parser.add_argument("--cap", type=float, default=120.0)
    parser.add_argument("--clients", action="store_true")
    args = parser.parse_args()
    suffix = "-clients" if args.clients else ""
    out = run.OUT / f"perf-scale-{args.n}{suffix}.data"
    run.OUT.mkdir(parents=True, exist_ok=True)
    split = Split(out)
    measured = run.scale_once(
        args.n, args.cap,
        split.around if args.clients else lambda pid: perf_record(pid, out))
    if measured is None:
        head = f"{args.n} nodes: no round within {args.cap:.0f} s"
    else:
        reports = measured[0]
        close = (max(r["done_ns"] for r in reports) -
                 min(r["start_ns"] for r in reports)) / 1e9
        head = (f"{args.n} nodes: round closed in {close:.3f} s; store CPU "
                f"{measured[1]:.2f} s during the join")
        if args.clients:
            head += (f"; simulated nodes' CPU {split.sims_cpu:.2f} s "
                     f"({len(split.sims)} processes, "
                     f"{split.sims_cpu / max(split.store_cpu, 1e-9):.1f}x "
                     f"the store's), at most {split.most_threads} threads "
                     "in one of them")
    only = (["--percentage", "relative",
             "--pid", ",".join(str(p) for p in split.sims)]
            if args.clients else [])
    report = subprocess.run(
        ["perf", "report", "-i", str(out), "--no-children", "--stdio",
         "--percent-limit", "2", "-g", "none", "--sort", "symbol"] + only,
        capture_output=True, text=True)
    lines = [l.rstrip(" -") for l in report.stdout.splitlines()
             if l.strip() and not l.startswith("#")]
    if not lines:
        # Say why there is no profile: perf refused (permissions) or
        # recorded nothing.
        perf_err = split.perf.stderr.read() if split.perf else ""
        print(f"perf recorded nothing: {perf_err}{report.stderr}",
              file=sys.stderr)
    flag = " --clients" if args.clients else ""
    whose = ("simulated nodes' processes" if args.clients
             else "store process")
    text = "\n".join([f"$ bench/profile_scale.py {args.n}{flag}", head,
                      f"{whose}, self time by symbol (perf):"] +
                     lines[:25]) + "\n"
    (run.OUT / f"profile-scale-{args.n}{suffix}.txt").write_text(text)
    print(text, end="")
    return 0 if measured is not None else 1


if __name__ == "__main__":
    sys.exit(main())
