#!/usr/bin/env python3
"""The timeline of one "node lost" recovery run (bench/run.py's
recover_once with the simulated nodes' debug log), in seconds from the
kill:

    /usr/bin/python3 bench/recover_timeline.py [NODES [KEEP_ALIVE_S]]

Build first: `bazel build //bench:store_bench`.
"""

import datetime
import json
import os
import pathlib
import re
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import run  # noqa: E402

LINE = re.compile(r"^\[(\S+) distjob-agent \d+ \w+\] (.*)$")


def wall_ns(stamp):
    t = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f")
    return int(t.timestamp() * 1e9)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    keep_alive_s = (float(sys.argv[2]) if len(sys.argv) > 2
                    else run.RECOVER_KEEP_ALIVE_S)
    with tempfile.TemporaryDirectory() as tmp:
        measured = run.recover_once(n, log_dir=tmp,
                                    keep_alive_s=keep_alive_s)
        if measured is None:
            print("the run did not finish")
            return 1
        replies = json.load(open(os.path.join(tmp, "kill.json")))
        kill = max(r["kill_ns"] for r in replies)
        offset = replies[0]["wall_minus_mono_ns"]  # one clock for all
        done = max(r["done_ns"] for r in replies)
        events = {}

        def note(name, mono):
            lo, hi, k = events.get(name, (mono, mono, 0))
            events[name] = (min(lo, mono), max(hi, mono), k + 1)

        for r in replies:
            if r["told_first_ns"]:
                note("survivors told (monitor fired)", r["told_first_ns"])
                note("survivors told (monitor fired)", r["told_last_ns"])
            note("survivors hold the next round", r["done_ns"])
        for name in sorted(os.listdir(tmp)):
            if not name.endswith(".log"):
                continue
            for line in open(os.path.join(tmp, name)):
                m = LINE.match(line.strip())
                if not m:
                    continue
                mono = wall_ns(m.group(1)) - offset
                if mono < kill or mono > done:
                    continue
                text = m.group(2)
                if "lost (no heartbeat" in text:
                    peer = re.search(r"peer (\S+) lost", text).group(1)
                    if peer == f"sim{n // 2}":
                        note("the killed node's lease expired, seen by the "
                             "member before it", mono)
                    else:
                        note("live nodes seen lost (their lease lapsed)",
                             mono)
                elif re.search(r"^round \d+: joined as", text):
                    note("survivors joined the next round", mono)
                elif "last call for" in text:
                    note("last call began", mono)
                elif re.search(r"round \d+: closed it with", text):
                    note("round closed", mono)
                elif re.search(r"group rank 0 of \d+ nodes", text):
                    note("rank 0 wrote the master record", mono)
        print(f"{n} nodes, node lost -> next round: {measured[0]:.2f} s")
        for name, (lo, hi, k) in sorted(events.items(),
                                        key=lambda e: e[1]):
            print(f"  {(lo - kill) / 1e9:6.2f} .. {(hi - kill) / 1e9:6.2f} s"
                  f"  {name} ({k})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
