"""`bench/run.sh --only worker_store_scale`: simulated ranks
(`bench/rank_sim`, store init + barrier) against the agent's workers'
store (a --standalone agent's MASTER_PORT) and against PyTorch's own
TCPStore server (PYTHON's: Debian's 1.13, the legacy backend, spoken to in
its own numbering), side by side in the same run, at 1K, 4K, 16K and 96K
ranks as far as this machine's open-file limit allows (issue 42)."""

import json
import os
import resource
import statistics
import subprocess
import time

import harness  # run.py puts tests/ on the path
import worker_store_bench

RANK_SIM = str(harness.ROOT / "bazel-bin" / "bench" / "rank_sim")
SIZES = (1024, 4096, 16384, 98304)
REPS = 3
# A size a server does not complete within 5 minutes is reported so.
CAP_S = 300
# No new run starts past this, so the section fits the sweep's budget.
BUDGET_S = 480


def hard_fd_limit():
    """Raises this process's soft open-file limit to the hard one, which
    the servers and the simulator inherit; the hard limit."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def fits(n, hard):
    # The server and the simulator run in processes of their own, each
    # holding a descriptor a rank beside a few hundred of its own (the
    # agent's workers' store takes what its limit leaves after 256 and the
    # rendezvous store's need, none for a --standalone job).
    return n + 512 <= hard


def simulate(store, n, dialect, tag, pattern="barrier", flags=()):
    """One run of n ranks (a barrier unless `pattern` says otherwise): the
    simulator's report, or None and why."""
    argv = [RANK_SIM, "--port", str(store.port), "--ranks", str(n),
            "--pattern", pattern, "--dialect", dialect,
            "--timeout-s", str(CAP_S), "--server-pid", str(store.proc.pid),
            "--prefix", f"{tag}/", *flags]
    try:
        done = subprocess.run(argv, capture_output=True, text=True,
                              timeout=CAP_S + 30)
    except subprocess.TimeoutExpired:
        return None, f"no report within {CAP_S + 30} s"
    lines = done.stdout.splitlines()
    report = json.loads(lines[0]) if lines else None
    if done.returncode != 0 or report is None:
        why = (done.stderr.strip().splitlines() or ["no report"])[0]
        return report, why
    return report, ""


SIDES = {
    # side: (start a fresh server, the dialect its clients speak)
    "distjob-agent": (lambda agent: worker_store_bench.AgentStore(agent),
                      "validated"),
    "torchrun": (lambda agent: worker_store_bench.Rank0Store(), "legacy"),
}


def one_run(side, agent, n, tag):
    start, dialect = SIDES[side]
    store = start(agent)
    try:
        return simulate(store, n, dialect, tag)
    finally:
        store.close()


def bench_worker_store_scale(reps, agent):
    """Rows for docs/bench/results.md: time from the first connect to the
    barrier released, per size, the agent's store (column distjob-agent)
    vs PyTorch's TCPStore (column torchrun); a series for the plot."""
    del reps  # REPS runs a side and size, alternating
    if not os.access(RANK_SIM, os.X_OK):
        raise SystemExit(f"{RANK_SIM} is not built: run bench/run.sh")
    hard = hard_fd_limit()
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    times, use, failed, skipped = {}, {}, {}, []
    for n in SIZES:
        if not fits(n, hard):
            skipped.append(n)
            continue
        for rep in range(REPS):
            order = list(SIDES) if rep % 2 == 0 else list(SIDES)[::-1]
            for side in order:
                if (side, n) in failed:
                    # It did not complete once, and a rerun costs up to
                    # CAP_S of the budget the other side's runs need.
                    continue
                if time.monotonic() - began > BUDGET_S:
                    failed.setdefault((side, n), "the section's budget")
                    continue
                report, why = one_run(side, agent, n, f"r{rep}")
                if why:
                    failed[(side, n)] = why
                    continue
                times.setdefault(n, {}).setdefault(side, []).append(
                    report["all_done_s"])
                use.setdefault((side, n), []).append(
                    dict(report["server"], sim_wait_s=report["sim_wait_s"]))
    load = (load_before, os.getloadavg()[0])
    return rows(times, use, failed, skipped, hard, load)


def note_end(load, failed, skipped, hard, names):
    """The end of a section's note: the machine's load (it is shared: what
    else ran shows there), then each size a side did not complete, or that
    did not run, and why. `names`: each side's name in the note."""
    note = (f" 1-minute load average {load[0]:.1f} before and {load[1]:.1f} "
            f"after, on {os.cpu_count()} CPUs.")
    if failed:
        note += " Not completed: " + "; ".join(
            f"{names[s]} at {n}: {why}" for (s, n), why in failed.items()
        ) + "."
    if skipped:
        note += (f" Not run: {', '.join(map(str, skipped))} ranks, beyond "
                 f"this machine's open-file hard limit of {hard} (the "
                 "server and the simulator each hold a descriptor a rank).")
    return note


def rows(times, use, failed, skipped, hard, load):
    results = []
    for n, samples in times.items():
        results.append({"name": f"worker store barrier, {n} simulated ranks",
                        "unit": "s", "group": "worker_store_scale",
                        "samples": samples})
    names = {"distjob-agent": "agent", "torchrun": "TCPStore"}
    figures = []
    for (side, n), servers in sorted(use.items(), key=lambda x: x[0][1]):
        cpu = statistics.median(s["cpu_s"] for s in servers)
        peak = max(s["peak_rss_kib"] for s in servers)
        grown = statistics.median(
            s["rss_kib_after"] - s["rss_kib_before"] for s in servers)
        # Time runnable but waiting for a CPU (/proc schedstat): what the
        # machine's other load added to the run (2026-11-29's 16K figure,
        # 5.56 s against 0.8-0.9 s run alone, was taken at a load of 6-7).
        wait = statistics.median(s["wait_s"] for s in servers)
        sim_wait = statistics.median(s["sim_wait_s"] for s in servers)
        figures.append(f"{names[side]} at {n}: {cpu:.2f} CPU s, "
                       f"{wait:.2f} s waiting for a CPU (the simulator "
                       f"{sim_wait:.2f} s), peak RSS "
                       f"{peak / 1024:.0f} MiB, {grown * 1024 / n:.0f} B "
                       "more RSS a connection")
    note = ("bench/rank_sim, pattern barrier (every rank adds to a counter, "
            "the one that reads N sets the release key, all wait on it), one "
            "connection a rank from 2 epoll threads over 127.0.0.0/8 source "
            "addresses, simulator and server sharing the machine; from the "
            "first connect to the last rank released; a fresh server each "
            f"run, {REPS} runs a side and size, alternating. The agent's side "
            "is a --standalone agent's workers' store (2.2+ clients' "
            "numbering, with the handshake); the torchrun column is "
            f"{worker_store_bench.torch_version()}'s TCPStore server in a "
            "Python process (the legacy backend; 1.13's numbering). Server "
            "use (median over runs; the time its threads and the "
            "simulator's were runnable but waiting for a CPU, which other "
            "load on the machine adds): " + "; ".join(figures) + ".")
    note += note_end(load, failed, skipped, hard, names)
    # The plot names the servers, not the launchers.
    labels = {"distjob-agent": "distjob-agent",
              "torchrun": f"TCPStore ({worker_store_bench.torch_version()})"}
    series = {labels[side]: {str(n): t[side] for n, t in times.items()
                             if side in t}
              for side in SIDES}
    results.append({"name": "worker store: time to barrier vs ranks",
                    "unit": "s", "series": series,
                    "plot": "worker_store_scale",
                    "xlabel": "simulated ranks", "note": note})
    return results
