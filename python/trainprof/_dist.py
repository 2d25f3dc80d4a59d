"""Who this process is in a distributed job: rank, local rank, world size and node, read from
the launchers' environment variables (torchrun / torch.distributed, Horovod / Open MPI, SLURM)."""

from __future__ import annotations

import os


# In order of preference: the first variable present wins.
_RANK = ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
_LOCAL_RANK = ("LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
_WORLD_SIZE = ("WORLD_SIZE", "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
_NODE = ("TRAINPROF_NODE", "SLURMD_NODENAME")


def _first_int(names: tuple[str, ...], env) -> int | None:
    for name in names:
        value = env.get(name)
        if value is None or value == "":
            continue
        try:
            return int(value)
        except ValueError:
            continue  # a malformed variable is ignored; the next launcher's may be right
    return None


def identity(env=None) -> dict:
    """{"rank", "local_rank", "world_size", "node"}; absent values are None."""
    env = os.environ if env is None else env
    node = next((env[n] for n in _NODE if env.get(n)), None) or os.uname().nodename
    return {
        "rank": _first_int(_RANK, env),
        "local_rank": _first_int(_LOCAL_RANK, env),
        "world_size": _first_int(_WORLD_SIZE, env),
        "node": node,
    }
