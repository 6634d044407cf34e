#!/usr/bin/env python3
"""Benchmarks distjob-agent against Debian's torchrun, side by side.

    /usr/bin/python3 bench/run.py [--reps N] [--only NAME,...]

Builds nothing: run `bazel build //agent:distjob-agent //bench:stamp` first
(bench/run.sh does both). Each benchmark alternates the two launchers,
repetition by repetition, so drift on the machine hits both alike. Results
go to docs/bench/results.json, docs/bench/results.md and docs/bench/*.png.
See bench/README.md for the method.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
AGENT = os.environ.get("DISTJOB_AGENT",
                       str(ROOT / "bazel-bin" / "agent" / "distjob-agent"))
STAMP = str(ROOT / "bazel-bin" / "bench" / "stamp")
PYTHON = "/usr/bin/python3"
TORCHRUN = [PYTHON, str(ROOT / "bench" / "torchrun_fixed.py")]
OUT = ROOT / "docs" / "bench"


def run_measured(argv, env=None, timeout=120):
    """Runs argv to success; returns its wall time in seconds."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            raise TimeoutError(" ".join(argv))
        time.sleep(0.0005)
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{argv} exited {code}")
    return wall


def peak_rss_mb(argv, timeout=120):
    """Peak RSS of the launcher process itself, in MB.

    Measured by GNU time (getrusage of its child), not from Python: a child
    forked from this Python process would report Python's RSS, since
    ru_maxrss survives exec.
    """
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%M"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=timeout, check=True)
        return int(out.read().split()[-1]) / 1024.0


def read_stamps(path):
    rows = []
    for line in pathlib.Path(path).read_text().splitlines():
        restart, what, ns = line.split()
        rows.append((int(restart), what, int(ns)))
    return rows


# -- benchmarks -------------------------------------------------------------

def bench_launch(reps):
    """Launch overhead: --standalone --nproc-per-node 1 -- /bin/true."""
    launchers = {
        "distjob-agent": [AGENT, "run", "--standalone", "--nproc-per-node",
                          "1", "--", "/bin/true"],
        "torchrun": TORCHRUN + ["--standalone", "--nproc_per_node", "1",
                                "--monitor_interval", "0.1", "--no_python",
                                "/bin/true"],
    }
    wall = {k: [] for k in launchers}
    rss = {k: [] for k in launchers}
    for _ in range(reps):
        for name, argv in launchers.items():
            wall[name].append(run_measured(argv))
            rss[name].append(peak_rss_mb(argv))
    return [
        {"name": "launch overhead (wall)", "unit": "s", "samples": wall,
         "target": {"distjob-agent": 0.010}},
        {"name": "launch overhead (peak RSS)", "unit": "MB", "samples": rss,
         "target": {"distjob-agent": 15.0}},
    ]


def bench_restart_standalone(reps):
    """Restart latency, standalone: worker exits 137 in attempt 0; time from
    that exit to the first instruction of its successor."""
    samples = {"distjob-agent": [], "torchrun": []}
    for _ in range(reps):
        for name in samples:
            with tempfile.TemporaryDirectory() as tmp:
                stamps = os.path.join(tmp, "stamps")
                worker = [STAMP, stamps, "137"]
                if name == "distjob-agent":
                    argv = [AGENT, "run", "--standalone", "--max-restarts",
                            "1", "--"] + worker
                else:
                    argv = TORCHRUN + ["--standalone", "--max_restarts", "1",
                                       "--monitor_interval", "0.1",
                                       "--no_python"] + worker
                run_measured(argv)
                rows = read_stamps(stamps)
                exit0 = [ns for r, w, ns in rows if r == 0 and w == "exit"][0]
                start1 = [ns for r, w, ns in rows if r == 1 and w == "start"][0]
                samples[name].append((start1 - exit0) / 1e9)
    return [{"name": "restart latency, standalone", "unit": "s",
             "samples": samples, "target": {"distjob-agent": 0.020}}]


BENCHMARKS = {
    "launch": bench_launch,
    "restart": bench_restart_standalone,
}


# -- reporting --------------------------------------------------------------

def summarize(result):
    rows = {}
    for launcher, xs in result["samples"].items():
        if not xs:
            continue
        xs = sorted(xs)
        rows[launcher] = {
            "median": statistics.median(xs), "min": xs[0], "max": xs[-1],
            "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
            "n": len(xs)}
    return rows


def fmt(value, unit):
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    return f"{value:.1f} {unit}"


def write_markdown(results, meta):
    lines = ["# distjob-agent vs torchrun: results", "",
             f"Measured {meta['date']} on {meta['machine']} by "
             f"`{meta['command']}` ({meta['reps']} repetitions per "
             "launcher, alternating). Median (min–max, stdev); ratio = "
             "torchrun median / distjob-agent median.", "",
             "| benchmark | distjob-agent | torchrun | ratio | target "
             "(agent) |", "|---|---|---|---|---|"]
    for result in results:
        s = summarize(result)
        unit = result["unit"]
        cells = []
        for launcher in ["distjob-agent", "torchrun"]:
            if launcher in s:
                r = s[launcher]
                cells.append(f"{fmt(r['median'], unit)} "
                             f"({fmt(r['min'], unit)}–{fmt(r['max'], unit)}, "
                             f"σ {fmt(r['stdev'], unit)})")
            else:
                cells.append("—")
        ratio = "—"
        if "distjob-agent" in s and "torchrun" in s and \
                s["distjob-agent"]["median"] > 0:
            ratio = f"{s['torchrun']['median'] / s['distjob-agent']['median']:.1f}×"
        target = result.get("target", {}).get("distjob-agent")
        verdict = "—"
        if target is not None and "distjob-agent" in s:
            met = s["distjob-agent"]["median"] <= target
            verdict = f"≤ {fmt(target, unit)}: {'met' if met else 'MISSED'}"
        lines.append(f"| {result['name']} | {cells[0]} | {cells[1]} | "
                     f"{ratio} | {verdict} |")
    lines.append("")
    for result in results:
        if result.get("note"):
            lines += [f"**{result['name']}**: {result['note']}", ""]
    (OUT / "results.md").write_text("\n".join(lines))


def write_plots(results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in results if r["unit"] == "s" and "series" not in r]
    if timed:
        fig, ax = plt.subplots(figsize=(7, 0.6 + 0.9 * len(timed)))
        labels, agent, torch = [], [], []
        for r in timed:
            s = summarize(r)
            labels.append(r["name"])
            agent.append(s.get("distjob-agent", {}).get("median", 0) * 1000)
            torch.append(s.get("torchrun", {}).get("median", 0) * 1000)
        ys = range(len(labels))
        ax.barh([y + 0.2 for y in ys], torch, 0.4, label="torchrun",
                color="#d62728")
        ax.barh([y - 0.2 for y in ys], agent, 0.4, label="distjob-agent",
                color="#1f77b4")
        ax.set_yticks(list(ys))
        ax.set_yticklabels(labels)
        ax.set_xscale("log")
        ax.set_xlabel("median, milliseconds (log scale)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "latency.png", dpi=110)
        plt.close(fig)
    for r in results:
        if "series" not in r:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for launcher, points in r["series"].items():
            xs = sorted(int(n) for n in points)
            ax.plot(xs, [statistics.median(points[str(x)]) for x in xs],
                    marker="o", label=launcher)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(r.get("xlabel", "N"))
        ax.set_ylabel(f"median, {r['unit']}")
        ax.set_title(r["name"])
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / f"{r['plot']}.png", dpi=110)
        plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help="comma-separated subset of: " +
                        ", ".join(BENCHMARKS))
    args = parser.parse_args()
    for path in (AGENT, STAMP):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is not built: run bench/run.sh")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.only.split(","):
        print(f"running {name} ...", flush=True)
        results += BENCHMARKS[name](args.reps)
    meta = {"date": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, "
                       f"Linux {platform.release()}",
            "command": "bench/run.sh " + " ".join(sys.argv[1:]),
            "reps": args.reps}
    (OUT / "results.json").write_text(json.dumps(
        {"meta": meta, "results": results}, indent=1))
    write_markdown(results, meta)
    write_plots(results)
    print((OUT / "results.md").read_text())


if __name__ == "__main__":
    main()
