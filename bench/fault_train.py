"""Real gloo DDP training with faults chosen by environment variables.

Used by the failure matrix (tests/e2e/test_e2e_failures.py) and the
"recovery with real collectives" benchmark (bench/run.py), under the agent
and under torchrun alike: it reads only torchrun's worker environment
(RANK, WORLD_SIZE, MASTER_*, TORCHELASTIC_RESTART_COUNT) and these:

    FT_DIR          where each attempt's record and the fault markers go
                    (required)
    FT_STEPS        steps to train (default 60)
    FT_STEP_S       pace of a step in seconds (default 0.05): a sleep
                    standing in for compute, then DDP's backward all_reduce,
                    so a killed peer leaves the others inside a collective
    FT_CHECKPOINT   checkpoint file (default FT_DIR/ckpt.pt): rank 0 saves
                    after every step and every attempt resumes from it
    FT_PG_TIMEOUT   init_process_group's timeout in seconds (default: torch's)
    FT_FAULT        nccl: raise RuntimeError("NCCL communicator was aborted
                    ..."); nccl-abort: the same, as NCCL's watchdog orders
                    it: the rank's connections closed first, its exception
                    a second later, so its peers fail first; keyerror:
                    raise KeyError('lr'); empty: no fault
    FT_FAULT_STEP   the step at which to raise (default 10)
    FT_FAULT_RANK   the global rank that raises (default 1)
    FT_FAULT_ONCE   1 (default): only the first attempt that reaches the step
                    raises (a marker file in FT_DIR); 0: every attempt does

Each attempt of each rank keeps FT_DIR/attempt-<host>-<pid>.json up to date
(rewritten atomically after every step): host, pid, rank, local_rank,
world, restart_count, started, joined (process group formed), start_step,
steps ([step, time completed] in wall-clock seconds), first_step,
steps_done, fault (when it raised), finished. Times are time.time(), so the
records of every pod on one host share a clock with the harness.
"""

import datetime
import hashlib
import json
import os
import pathlib
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP

NCCL_MESSAGE = ("NCCL communicator was aborted on rank {rank}. Original "
                "reason for failure was: NCCL error in: ProcessGroupNCCL.cpp"
                ":1269, unhandled system error, NCCL version 2.18.1")


class Attempt:
    """This process's record, rewritten after every change."""

    def __init__(self, out):
        self.path = out / f"attempt-{socket.gethostname()}-{os.getpid()}.json"
        self.data = {
            "host": socket.gethostname(), "pid": os.getpid(),
            "rank": int(os.environ["RANK"]),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "world": int(os.environ["WORLD_SIZE"]),
            "restart_count": int(os.environ.get(
                "TORCHELASTIC_RESTART_COUNT", "0")),
            "started": time.time(), "joined": None, "start_step": None,
            "steps": [], "first_step": None, "steps_done": 0, "fault": None,
            "finished": None}
        self.save()

    def set(self, **kwargs):
        self.data.update(kwargs)
        self.save()

    def step_done(self, step):
        now = time.time()
        self.data["steps"].append([step, now])
        self.data["steps_done"] += 1
        if self.data["first_step"] is None:
            self.data["first_step"] = now
        self.save()

    def save(self):
        tmp = self.path.with_name("." + self.path.name)
        tmp.write_text(json.dumps(self.data))
        os.replace(tmp, self.path)


def close_connections():
    """Shuts down every socket of this process, as an aborted communicator
    closes its connections: the peers read "Connection closed by peer"."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            s = socket.socket(fileno=int(name))
        except OSError:
            continue
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # a listening or unconnected socket
        s.detach()


def maybe_fault(out, step, rank, attempt):
    kind = os.environ.get("FT_FAULT", "")
    if not kind or step != int(os.environ.get("FT_FAULT_STEP", "10")) or \
            rank != int(os.environ.get("FT_FAULT_RANK", "1")):
        return
    if os.environ.get("FT_FAULT_ONCE", "1") == "1":
        try:
            os.close(os.open(out / f"fault-{kind}-{rank}-{step}",
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return  # an earlier attempt raised already
    attempt.set(fault=time.time())
    if kind == "nccl-abort":
        close_connections()
        time.sleep(1.0)
        kind = "nccl"
    if kind == "nccl":
        raise RuntimeError(NCCL_MESSAGE.format(rank=rank))
    if kind == "keyerror":
        hyper = {"momentum": 0.9}
        hyper["lr"]  # noqa: B018 - the KeyError('lr') a typo'd config gives
    raise ValueError(f"FT_FAULT={kind}: expected nccl or keyerror")


def save_checkpoint(path, step, model, opt):
    tmp = path.with_name("." + path.name)
    torch.save({"step": step, "model": model.state_dict(),
                "opt": opt.state_dict()}, tmp)
    os.replace(tmp, path)


def digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    return h.hexdigest()


@record
def main():
    out = pathlib.Path(os.environ["FT_DIR"])
    steps = int(os.environ.get("FT_STEPS", "60"))
    pace = float(os.environ.get("FT_STEP_S", "0.05"))
    ckpt = pathlib.Path(os.environ.get("FT_CHECKPOINT", out / "ckpt.pt"))
    attempt = Attempt(out)
    kwargs = {}
    if os.environ.get("FT_PG_TIMEOUT"):
        kwargs["timeout"] = datetime.timedelta(
            seconds=float(os.environ["FT_PG_TIMEOUT"]))
    dist.init_process_group("gloo", **kwargs)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    ddp = DDP(model)
    # Nobody saves before every rank has read the checkpoint.
    dist.barrier()
    attempt.set(joined=time.time(), start_step=start)
    print(f"rank {rank}/{world} resumes at step {start} (restart "
          f"{attempt.data['restart_count']})", flush=True)
    for step in range(start, steps):
        began = time.monotonic()
        maybe_fault(out, step, rank, attempt)
        gen = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(16, 32, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        time.sleep(max(0.0, pace - (time.monotonic() - began)))
        loss.backward()  # DDP's all_reduce of every gradient
        opt.step()
        if rank == 0:
            save_checkpoint(ckpt, step + 1, model, opt)
        attempt.step_done(step)
        if rank == 0 and step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f} world {world}",
                  flush=True)
    attempt.set(finished=time.time(), digest=digest(model))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
