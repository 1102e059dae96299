"""Training functions for test_torch_job.py: each is one replica of a PyTorchJob (a file target,
`".../torch_targets.py:rendezvous"`, so it travels to Dask workers as a user's code file does)."""

import os
import time
from pathlib import Path

RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "OMP_NUM_THREADS")


def _note_pid(pid_dir: str | None) -> None:
    if pid_dir:
        Path(pid_dir, f"pid-{os.environ['RANK']}").write_text(str(os.getpid()))


def rendezvous(path: str | None = None) -> dict:
    """Join the gloo group, all_reduce the ranks; rank 0 returns what every replica saw."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world} joined", flush=True)
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    seen = {
        "env": {k: os.environ.get(k) for k in RENDEZVOUS},
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "path": path,
        "text": Path(path).read_text() if path else None,
    }
    everyone: list = [None] * world
    dist.all_gather_object(everyone, seen)
    dist.destroy_process_group()
    return {"sum": total.item(), "replicas": everyone}


def fail_on_rank_one(pid_dir: str) -> None:
    """Rendezvous; then rank 1 raises while rank 0 waits (as for a collective) far too long."""
    import torch.distributed as dist

    _note_pid(pid_dir)
    dist.init_process_group("gloo")
    if dist.get_rank() == 1:
        # When it failed (wall clock, read by the test in another process): how soon the job
        # ends after a failure is what is asserted, not how long slow replicas took to start.
        (Path(pid_dir) / "failed-at").write_text(repr(time.time()))
        raise ValueError("boom")
    time.sleep(600)


def sleep(pid_dir: str | None = None) -> None:
    """Note this replica's pid, then sleep far longer than any test."""
    _note_pid(pid_dir)
    time.sleep(600)


def echo(**kwargs: object) -> dict:
    """Return the arguments and the rank (no torch: a replica that only starts and ends)."""
    return {"kwargs": kwargs, "rank": os.environ["RANK"], "world": os.environ["WORLD_SIZE"]}
