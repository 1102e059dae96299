"""What every replica of a PyTorchJob starts with, and how the failure of one is told.

Each replica sees the rendezvous variables of the Kubeflow training operator
(`rendezvous_env`: master = rank 0 on a `free_port` there), imports its target from the
launcher's `python_path` when it runs on the launcher's machine, and has its output lines
prefixed with its rank (`prefixed`). `replica_failure` is the error `launch` raises when
one fails, wherever it ran.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import Callable

from headwater.errors import UserError

__all__ = ["free_port", "prefixed", "python_path", "rendezvous_env", "replica_failure"]


def rendezvous_env(rank: int, world: int, master: str, port: int, threads: int) -> dict[str, str]:
    """The variables one replica sees (the operator's, plus threads and LOCAL_RANK)."""
    return {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(world),
        "RANK": str(rank),
        "LOCAL_RANK": "0",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
    }


def free_port() -> int:
    """A TCP port free on this host now (rank 0 binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def replica_failure(
    rank: int, world: int, code: int | None, last: str, where: str = ""
) -> UserError:
    """The error of replica `rank` of `world` that ended with `code` after printing `last`."""
    if code is None:
        how = "failed"
    elif code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
    else:
        how = f"failed (exit {code})"
    return UserError(
        f"replica {rank} of {world}{where} {how}: {last or '(no output)'}; the other "
        "replicas were stopped"
    )


def python_path(existing: str) -> str:
    """PYTHONPATH for a local replica: what this process imports from, so the target imports
    there as it does here."""
    entries = [p for p in sys.path if p] + [p for p in existing.split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(entries))


def prefixed(say: Callable[[str], None]) -> Callable[[int, str], None]:
    """A replica's line callback: `say` each line as "[rank i] line"."""

    def on_line(rank: int, line: str) -> None:
        say(f"[rank {rank}] {line}")

    return on_line
