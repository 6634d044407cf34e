"""A worker for tests/device/check.sh's restart probe: gloo's
init_process_group and an all_reduce in each attempt; in attempt 0 rank 1
then kills itself, so the launcher restarts the group, and attempt 1's
init_process_group meets whatever attempt 0 left in the workers' store."""

import datetime
import os
import signal

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
t = torch.ones(1)
dist.all_reduce(t)
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if attempt == 0 and dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGKILL)
dist.barrier()
print(f"attempt {attempt} rank {dist.get_rank()} sum {t.item():.0f}",
      flush=True)
dist.destroy_process_group()
