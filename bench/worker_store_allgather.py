"""`bench/run.sh --only worker_store_allgather`: gloo's all-gather through
the store (`bench/rank_sim --pattern allgather`: every rank sets its
address, then waits for and multi_gets every other rank's in batches,
O(N²) bytes) at 1K, 4K and 16K ranks, against the agent's workers' store and
against PyTorch's TCPStore server, side by side in the same run, with each
server's CPU time per byte answered (issue 42, item 4).

With DISTJOB_AGENT_BEFORE naming another agent binary (one built before a
change to the store), that agent runs the same sizes too, last, and a row
per size sets it beside this one; DISTJOB_AGENT_BEFORE_CHANGE says in the
note what that build lacks."""

import os
import subprocess
import time

import worker_store_bench
import worker_store_scale

# 1K first: O(N²) from there says whether a side can do 4K within the cap.
SIZES = (1024, 4096, 16384)
# Gloo's batches of keys; its ranks' addresses are about 100 bytes.
BATCH = 512
VALUE_BYTES = 100
# Ranks per loopback source address: a real node runs about 8, and one
# address may hold a quarter of the server's waits' bytes (a parked wait
# of 512 keys is ~30 KB), which 1,000 ranks' waits of one address pass.
PER_SOURCE = 250
CAP_S = worker_store_scale.CAP_S
# No new run starts past this.
BUDGET_S = 720
BEFORE = os.environ.get("DISTJOB_AGENT_BEFORE", "")
BEFORE_CHANGE = os.environ.get("DISTJOB_AGENT_BEFORE_CHANGE", "")

SIDES = {
    # side: (start a fresh server, the dialect its clients speak)
    "distjob-agent": (lambda agent: worker_store_bench.AgentStore(agent),
                      "validated"),
    "before": (lambda agent: worker_store_bench.AgentStore(BEFORE),
               "validated"),
    "torchrun": (lambda agent: worker_store_bench.Rank0Store(), "legacy"),
}
NAMES = {"distjob-agent": "agent", "before": "agent before",
         "torchrun": "TCPStore"}


def one_run(side, agent, n):
    start, dialect = SIDES[side]
    store = start(agent)
    try:
        return worker_store_scale.simulate(
            store, n, dialect, f"g{n}", pattern="allgather",
            flags=["--batch", str(BATCH), "--value-bytes", str(VALUE_BYTES),
                   "--per-source", str(PER_SOURCE)])
    finally:
        store.close()


def skip_reason(side, n, done, failed, began):
    """Why `side` does not run `n` ranks, or "" when it does."""
    # From the largest smaller size it ran: the closest estimate.
    for m in sorted((m for m in SIZES if m < n), reverse=True):
        if (side, m) in failed:
            if failed[(side, m)].startswith("not run"):
                return f"not run, as at {m} ranks"
            return f"not run: it did not complete {m} ranks"
        if (side, m) in done:
            # O(N²): a run of n ranks takes at least (n/m)² the m-rank
            # run's time.
            guess = done[(side, m)]["all_done_s"] * (n / m) ** 2
            if guess > CAP_S:
                return (f"not run: its {m}-rank run took "
                        f"{done[(side, m)]['all_done_s']:.1f} s, and "
                        f"{(n // m) ** 2}× that (the bytes grow as N²) is "
                        f"past the {CAP_S} s cap")
            break
    if time.monotonic() - began > BUDGET_S:
        return "not run: the section's budget was spent"
    return ""


def bench_worker_store_allgather(reps, agent):
    """Rows for docs/bench/results.md: the all-gather's time per size, the
    agent's store (distjob-agent) vs TCPStore (torchrun); with
    DISTJOB_AGENT_BEFORE, the agent vs that build of it."""
    del reps  # one run a side and size: each is O(N²)
    hard = worker_store_scale.hard_fd_limit()
    # The comparison with another build last: the section's budget cuts
    # it first.
    sides = ["distjob-agent", "torchrun"] + (["before"] if BEFORE else [])
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    done, failed, skipped = {}, {}, []
    for n in SIZES:
        if not worker_store_scale.fits(n, hard):
            skipped.append(n)
            continue
        for side in sides:
            why = skip_reason(side, n, done, failed, began)
            if why:
                failed[(side, n)] = why
                continue
            report, why = one_run(side, agent, n)
            if why:
                failed[(side, n)] = why
            else:
                done[(side, n)] = report
    load = (load_before, os.getloadavg()[0])
    return rows(done, failed, skipped, hard, load)


def build_of(agent):
    """The commit an agent binary says it was built from."""
    out = subprocess.run([agent, "--version"], capture_output=True,
                         text=True).stdout
    commits = [line.split()[-1] for line in out.splitlines()
               if line.startswith("commit:")]
    return f"commit {commits[0]}" if commits else os.path.basename(agent)


def cost(report):
    """The server's figures of one run, for the note."""
    server = report["server"]
    answered = report["bytes_received"]
    return (f"{report['all_done_s']:.1f} s, {server['cpu_s']:.1f} CPU s for "
            f"{answered / 1e9:.2f} GB answered ("
            f"{server['cpu_s'] * 1e9 / answered:.2f} ns a byte), peak RSS "
            f"{server['peak_rss_kib'] / 1024:.0f} MiB")


def rows(done, failed, skipped, hard, load):
    results = []
    for n in SIZES:
        samples = {side: [done[(side, n)]["all_done_s"]]
                   for side in ("distjob-agent", "torchrun")
                   if (side, n) in done}
        if samples:
            results.append({
                "name": f"worker store all-gather, {n} simulated ranks",
                "unit": "s", "group": "worker_store_allgather",
                "samples": samples})
        if ("distjob-agent", n) in done and ("before", n) in done:
            results.append({
                "name": f"worker store all-gather, {n} simulated ranks, "
                        "agent vs the agent before",
                "unit": "s", "group": "worker_store_allgather",
                "anchor": "before",
                "samples": {
                    "distjob-agent": [done[("distjob-agent", n)]
                                      ["all_done_s"]],
                    "torchrun": [done[("before", n)]["all_done_s"]]}})
    figures = [f"{NAMES[side]} at {n}: {cost(report)}"
               for (side, n), report in sorted(done.items(),
                                               key=lambda x: x[0][1])]
    note = (f"bench/rank_sim, pattern allgather (gloo's: every rank sets a "
            f"{VALUE_BYTES}-byte address, then waits for and multi_gets "
            f"every other rank's, {BATCH} keys a batch), one connection a "
            f"rank from 2 epoll threads, {PER_SOURCE} ranks a 127.0.0.0/8 "
            "source address, simulator and server sharing the machine; "
            "from the first connect to the last rank done; a fresh server "
            "each run, one run a side and size (O(N²) bytes). The agent's "
            "side is a --standalone agent's workers' store (2.2+ clients' "
            "numbering: one MULTI_GET a batch); the torchrun column is "
            f"{worker_store_bench.torch_version()}'s TCPStore server in a "
            "Python process (1.13's numbering, which has no MULTI_GET: one "
            "GET a key, sent together). Server CPU per byte answered (every "
            "byte the ranks read): " + "; ".join(figures) + ".")
    if BEFORE:
        note += (" The rows *agent vs the agent before* set this agent "
                 "against the one DISTJOB_AGENT_BEFORE named ("
                 f"{build_of(BEFORE)}), in the torchrun column" +
                 (f": that one {BEFORE_CHANGE}." if BEFORE_CHANGE else "."))
    note += worker_store_scale.note_end(load, failed, skipped, hard, NAMES)
    if results:
        results[-1]["note"] = note
    else:
        results.append({"name": "worker store all-gather", "unit": "s",
                        "group": "worker_store_allgather", "samples": {},
                        "note": note})
    return results
