"""A small PyTorch DDP job (gloo, CPU) to run through distjob-agent.

It fits y = 3x - 2 + noise with a 1->16->1 MLP. Every rank uses the same
seeded model, a different slice of a seeded data set, and DDP averages the
gradients, so all ranks must end with identical parameters and a falling
loss. With --out DIR each rank writes DIR/rank<N>.json with its loss curve
and a digest of its final parameters (the tests read these). With
--checkpoint PATH rank 0 saves the model after every epoch and every rank
resumes from it, so an elastic restart continues where the job left off.

    distjob-agent run --standalone --nproc-per-node 2 -- \
        /usr/bin/python3 examples/pytorch/train_ddp.py --epochs 20
"""

import argparse
import hashlib
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--out", help="directory for per-rank results")
    parser.add_argument("--checkpoint", help="file to save/resume the model")
    return parser.parse_args()


def param_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    dist.init_process_group("gloo")  # reads RANK, WORLD_SIZE, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    start_epoch = 0
    if args.checkpoint and os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        start_epoch = state["epoch"] + 1
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)

    gen = torch.Generator().manual_seed(1)
    x = torch.rand(args.samples, 1, generator=gen) * 2 - 1
    y = 3 * x - 2 + 0.05 * torch.randn(args.samples, 1, generator=gen)
    mine = slice(rank, args.samples, world)  # this rank's shard
    xs, ys = x[mine], y[mine]

    losses = []
    for epoch in range(start_epoch, args.epochs):
        total = torch.zeros(1)
        for i in range(0, len(xs), args.batch):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(
                ddp(xs[i:i + args.batch]), ys[i:i + args.batch])
            loss.backward()
            opt.step()
            total += loss.detach() * len(xs[i:i + args.batch])
        dist.all_reduce(total)
        losses.append(total.item() / args.samples)
        if rank == 0:
            print(f"epoch {epoch} loss {losses[-1]:.5f} world {world}",
                  flush=True)
            if args.checkpoint:
                tmp = args.checkpoint + ".tmp"
                torch.save({"model": model.state_dict(), "epoch": epoch}, tmp)
                os.replace(tmp, args.checkpoint)
        dist.barrier()

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"rank{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world_size": world, "losses": losses,
                       "digest": param_digest(model),
                       "start_epoch": start_epoch}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
