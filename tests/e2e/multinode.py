"""Shared pieces of the multi-node scenarios: the agent's command line for a
job whose pods rendezvous over c10d with the store on one pod."""

import os
import pathlib
import subprocess

from harness import PYTHON, ROOT

EXAMPLE = ROOT / "examples" / "pytorch" / "train_ddp.py"
RDZV_PORT = 29400
# Short liveness and read timeouts keep failure scenarios to seconds: a lost
# peer shows after 2 s, a lost store after 10 s, a round closes 2 s after
# its minimum joined.
READ_TIMEOUT = 10
RDZV_CONF = ("keep_alive_interval=1,keep_alive_max_attempt=2,"
             f"read_timeout={READ_TIMEOUT},last_call_timeout=2,"
             "join_timeout=60,exit_barrier_timeout=60")
GRACE = 10


def torch_available():
    return os.path.exists(PYTHON) and subprocess.run(
        [PYTHON, "-c", "import torch.distributed"],
        capture_output=True).returncode == 0


def rdzv_env(cluster, host_pod, nnodes, max_restarts=0, nproc=2):
    """torchrun's PET_* variables, as a PyTorchJob or a Volcano job sets
    them: the endpoint is the store host's pod name under the job's
    service."""
    return {"PET_NNODES": str(nnodes),
            "PET_NPROC_PER_NODE": str(nproc),
            "PET_RDZV_BACKEND": "c10d",
            "PET_RDZV_ENDPOINT": f"{host_pod.host}:{RDZV_PORT}",
            "PET_RDZV_ID": cluster.job,
            "PET_RDZV_CONF": RDZV_CONF,
            "PET_MAX_RESTARTS": str(max_restarts)}


def run_args(pod, command):
    """`run` for one pod: it publishes its service name as MASTER_ADDR (the
    bare hostname does not resolve in the other pods, as in Kubernetes)."""
    return ["run", "--local-addr", pod.host, "--shutdown-timeout",
            str(GRACE), "--"] + list(command)


def results_text(results):
    """Every pod's exit and log tail, for assertion messages."""
    return "\n".join(
        f"--- {name}: exit {r.exit_code} ({r.artifacts})\n"
        f"{r.termination_message}\n{r.stderr[-1500:]}"
        for name, r in results.items())


# The stand-in of a TensorFlow/MXNet worker (framework_standin.py).
STANDIN = pathlib.Path(__file__).parent / "framework_standin.py"
