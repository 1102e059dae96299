"""Reaching a Dask cluster: connecting to a scheduler, starting a local one, its hosts."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

from headwater import config
from headwater.errors import UserError
from headwater.security import is_loopback

#: Seconds to reach a scheduler before giving up (the unreachable-scheduler line).
CONNECT_TIMEOUT_S = 2.0


def connect_client(distributed: Any, address: str) -> Any:
    """A client of the scheduler at `address`, or one line saying why there is none."""
    try:
        _probe(address)
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(
            f"cannot reach the Dask scheduler at {address} within {CONNECT_TIMEOUT_S:g} s "
            f"({why}): start one (dask scheduler) or fix --scheduler / ${config.DASK_SCHEDULER_ENV}"
        ) from exc
    return client


def _probe(address: str) -> None:
    """Fail fast, in `CONNECT_TIMEOUT_S` at most, where `distributed.Client` would wait longer.

    A refused port fails at once (the client retries it until its timeout), and a port that
    accepts but never speaks Dask's protocol fails at the deadline (the client's handshake has
    none: it would wait forever).

    Raises:
        OSError: Nothing that answers as a Dask scheduler is at `address`.
        ValueError: `address` is not an address.
    """
    import asyncio

    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.core import connect

    scheme, location = parse_address(address)
    if scheme in ("tcp", "tls"):
        host, port = parse_host_port(location)
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    extra: dict[str, Any] = {}
    if scheme == "tls":  # the credentials Dask's configuration names (`private_security`)
        from distributed.security import Security

        extra = Security().get_connection_args("client")  # type: ignore[no-untyped-call]

    async def handshake() -> None:
        comm = await asyncio.wait_for(
            connect(address, timeout=CONNECT_TIMEOUT_S, **extra),  # type: ignore[no-untyped-call]
            CONNECT_TIMEOUT_S,
        )
        await comm.close()

    try:
        asyncio.run(handshake())
    except asyncio.TimeoutError as exc:
        raise OSError(f"no Dask handshake within {CONNECT_TIMEOUT_S:g} s") from exc
    except Exception as exc:  # CommClosedError and friends: not a scheduler there
        raise OSError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc


def private_security(folder: Path) -> Any:
    """TLS credentials for a cluster only their holders may use (a team server's: a sandboxed
    task must not reach workers that run outside any sandbox), written into `folder` (made
    0700, each file 0600) and named in this process's environment as Dask's configuration
    reads it, for the processes it starts (the server's workers connect with them).

    Returns:
        The `distributed.security.Security` to start the cluster with.
    """
    from distributed.security import Security

    made = Security.temporary()  # type: ignore[no-untyped-call]
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    paths = {}
    for name, text in (("ca", made.tls_ca_file), ("cert", made.tls_client_cert),
                       ("key", made.tls_client_key)):  # fmt: skip
        path = folder / f"{name}.pem"
        path.touch(mode=0o600)
        path.write_text(text)
        paths[name] = str(path)
    os.environ.update(
        DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION="True",
        DASK_DISTRIBUTED__COMM__TLS__CA_FILE=paths["ca"],
        DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=paths["cert"],
        DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=paths["key"],
    )
    return made


def start_local_cluster(security: Any = None) -> Any:
    """`_local_cluster()`, or one line saying why it could not start.

    Args:
        security: TLS credentials the cluster requires of every client (`private_security`);
            None: an open cluster on loopback.

    Raises:
        UserError: The worker processes did not start; most often a script without an
            `if __name__ == "__main__":` guard, which Dask's spawned workers import again.
    """
    try:
        return _local_cluster(security)
    except RuntimeError as exc:
        raise UserError(
            f"could not start a local Dask cluster ({exc}); in a script, run the pipeline "
            'under `if __name__ == "__main__":` (Dask\'s worker processes import the script '
            "again), or pass --scheduler / scheduler= for a running cluster"
        ) from exc


def _local_cluster(security: Any = None) -> Any:
    """A LocalCluster sized to this machine; a LocalCUDACluster when it has GPUs and dask-cuda.

    Worker processes (one per 4 cores, or `$HEADWATER_DASK_WORKERS`; one per GPU on a CUDA
    cluster), each advertising its
    share of the machine as `CPU` and `MEMORY` (and `GPU=1` on a CUDA cluster), with two
    threads per core between them, as the local executor admits two tasks per core. Tasks of a
    worker that dies are not re-run by Dask: the task's retry policy decides.
    """
    import dask

    from headwater.machine import detect_gpus, machine_cpus, machine_memory

    cpus = machine_cpus()
    gpus = detect_gpus()
    memory = machine_memory()
    private = {} if security is None else {"security": security, "protocol": "tls://"}
    # Read by the scheduler when it starts (in this process): only this cluster's setting.
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        if gpus:
            with contextlib.suppress(ImportError):
                from dask_cuda import LocalCUDACluster

                per = cpus / len(gpus)
                return LocalCUDACluster(
                    CUDA_VISIBLE_DEVICES=",".join(gpus),
                    threads_per_worker=max(1, int(2 * per)),
                    resources={"GPU": 1, "CPU": per, "MEMORY": memory / len(gpus)},
                    dashboard_address=":0",
                    silence_logs=50,
                    **private,
                )
        from distributed import LocalCluster

        # HEADWATER_DASK_WORKERS (as for `headwater.compute`) sets the count, e.g. to give each
        # replica of a DDP job its own worker on a small machine.
        workers = config.dask_workers() or max(1, cpus // 4)
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers,
            threads_per_worker=max(1, 2 * cpus // workers),
            processes=True,
            resources={"CPU": cpus / workers, "MEMORY": memory / workers},
            dashboard_address=":0",
            silence_logs=50,
            **private,
        )


def refuse_local_root(root: str, worker_hosts: list[str], here: set[str]) -> None:
    """Raise when a local `root` is asked of workers on hosts other than this one (`here`).

    A loopback address (any of 127.0.0.0/8, ::1) is this machine whether or not an interface
    lists it: Linux answers the whole block on `lo`.

    Raises:
        UserError: Some worker host is neither loopback nor one of `here`'s names or addresses.
    """
    away = sorted({host for host in worker_hosts if host not in here and not is_loopback(host)})
    if away:
        raise UserError(
            f"pipeline root {root!r} is on this machine, but Dask workers run on "
            f"{', '.join(away)}, which cannot see it: use an s3:// or gs:// root "
            "(--pipeline-root), or pass --shared-fs if every worker mounts it at that path"
        )


def local_addresses() -> set[str]:
    """The names and addresses by which a worker on this machine may be known."""
    names = {"127.0.0.1", "localhost", "::1", socket.gethostname(), socket.getfqdn()}
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]))
    with contextlib.suppress(Exception):
        import psutil

        for addresses in psutil.net_if_addrs().values():
            names.update(a.address.split("%")[0] for a in addresses)
    return names
