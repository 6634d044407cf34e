"""Runs examples/pytorch/train_ddp.py as a worker the scenarios can steer.

Each rank records how it started (START_DIR/start-<host>-<local rank>-<pid>.json:
WORLD_SIZE, RANK, the epoch it resumed from, the restart count). After each
epoch's barrier a rank holds while the epoch is at or past the number in the
GATE file (GATE=N: train N epochs, then hold; touching START_DIR/gate-<world>-<rank>-<epoch>), so a test knows
the whole group is mid-training at a known epoch before it scales, kills or
stops something. FAULT=kill|exit with FAULT_POD=<hostname> makes local rank 1
of that pod fail after epoch FAULT_EPOCH of the first attempt: SIGKILL
(retryable) or an exception recorded in its error file, of the builtin class
FAULT_EXCEPTION (default RuntimeError, which the agent's cause table restarts
once; ValueError is a bug, which stops the job at once).
"""

import builtins
import json
import os
import pathlib
import runpy
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

EXAMPLE = str(pathlib.Path(__file__).resolve().parents[2] / "examples" /
              "pytorch" / "train_ddp.py")


def checkpoint_arg(argv):
    return argv[argv.index("--checkpoint") + 1] if "--checkpoint" in argv \
        else None


@record
def main():
    out = pathlib.Path(os.environ["START_DIR"])
    gate = os.environ.get("GATE")
    host = socket.gethostname()
    local_rank = os.environ["LOCAL_RANK"]
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    ckpt = checkpoint_arg(sys.argv)
    start_epoch = 0
    if ckpt and os.path.exists(ckpt):
        start_epoch = torch.load(ckpt)["epoch"] + 1
    tmp = out / f".start-{host}-{local_rank}-{os.getpid()}"
    tmp.write_text(json.dumps({"host": host, "local_rank": int(local_rank),
                               "world": world, "rank": rank,
                               "start_epoch": start_epoch,
                               "restart": restart}))
    tmp.rename(out / f"start-{host}-{local_rank}-{os.getpid()}.json")

    fault = os.environ.get("FAULT")
    targeted = (fault and os.environ.get("FAULT_POD") == host
                and local_rank == "1" and restart == 0)
    fault_epoch = int(os.environ.get("FAULT_EPOCH", "1"))
    epoch = [start_epoch]
    barrier = dist.barrier

    def steered_barrier(*args, **kwargs):
        result = barrier(*args, **kwargs)
        e = epoch[0]
        epoch[0] += 1
        if targeted and e == fault_epoch:
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            error = getattr(builtins,
                            os.environ.get("FAULT_EXCEPTION", "RuntimeError"))
            raise error(f"loss is NaN at epoch {e} on {host}")
        marked = False
        while gate and e + 1 >= int(pathlib.Path(gate).read_text() or 0):
            if not marked:
                (out / f"gate-{world}-{rank}-{e}").touch()
                marked = True
            time.sleep(0.05)
        return result

    dist.barrier = steered_barrier
    sys.argv = [EXAMPLE] + sys.argv[1:]
    runpy.run_path(EXAMPLE, run_name="__main__")


if __name__ == "__main__":
    main()
