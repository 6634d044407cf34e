"""Where a store request's time goes: CPU time and context switches per
operation of every thread of the store's process and of the client's, while
`store_bench ops` runs one operation back to back (/proc schedstat and
status, read twice during the run).

    /usr/bin/python3 bench/profile_store.py [OP] [CLIENTS] [SECONDS]

OP: get, set_get, add, compare_set, wait (default add); CLIENTS: client
threads in one process (default 1); SECONDS: at least 3 (default 4).
Needs the build of bench/run.sh. The figures behind
docs/bench/store-profile.md; add `perf record -g -p PID` of the server for
the symbols.
"""

import json
import os
import subprocess
import sys
import time

import run


def threads(pid):
    """{tid_name: (cpu ns, context switches)} of every thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        task = f"/proc/{pid}/task/{tid}"
        try:
            with open(f"{task}/comm") as f:
                name = f.read().strip()
            with open(f"{task}/schedstat") as f:
                cpu = int(f.read().split()[0])
            with open(f"{task}/status") as f:
                switches = sum(int(line.split()[1]) for line in f
                               if "ctxt_switches" in line)
        except FileNotFoundError:
            continue  # the thread ended
        out[f"{tid}_{name}"] = (cpu, switches)
    return out


def per_op(before, after, ops, who):
    rows = {}
    for key, (cpu, switches) in after.items():
        cpu0, switches0 = before.get(key, (0, 0))
        row = rows.setdefault(key.split("_", 1)[1], [0.0, 0.0])
        row[0] += (cpu - cpu0) / ops / 1000
        row[1] += (switches - switches0) / ops
    total = [sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())]
    for name, (cpu, switches) in sorted(rows.items()):
        if cpu >= 0.2 or switches >= 0.05:
            print(f"  {who:6s} {name:18s} {cpu:6.1f} µs CPU/op  "
                  f"{switches:5.2f} switches/op")
    print(f"  {who:6s} {'all threads':18s} {total[0]:6.1f} µs CPU/op  "
          f"{total[1]:5.2f} switches/op")


def main():
    op = sys.argv[1] if len(sys.argv) > 1 else "add"
    clients = sys.argv[2] if len(sys.argv) > 2 else "1"
    seconds = max(3.0, float(sys.argv[3]) if len(sys.argv) > 3 else 4.0)
    server, port = run.start_server([run.STORE_BENCH, "server"])
    try:
        client = subprocess.Popen(
            [run.STORE_BENCH, "ops", f"127.0.0.1:{port}", op, clients,
             str(seconds)], stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # connected and running
        s0, c0, t0 = threads(server.pid), threads(client.pid), time.monotonic()
        time.sleep(seconds - 2.0)
        s1, c1, t1 = threads(server.pid), threads(client.pid), time.monotonic()
        r = json.loads(client.communicate(timeout=60)[0].splitlines()[-1])
    finally:
        run.stop_server(server)
    ops = r["ops_per_s"] * (t1 - t0)
    print(f"{op}, {clients} client(s): p50 {r['p50'] * 1e6:.0f} µs, p99 "
          f"{r['p99'] * 1e6:.0f} µs, {r['ops_per_s']:.0f} ops/s")
    per_op(s0, s1, ops, "server")
    per_op(c0, c1, ops, "client")


if __name__ == "__main__":
    main()
