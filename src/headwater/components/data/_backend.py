"""Where the data functions compute: the Dask client, and pandas or cuDF on its workers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from headwater._deps import require
from headwater.errors import InvalidArgumentError

BACKENDS = ("pandas", "cudf")
#: `dask.config` schedulers that mean "compute here, without a cluster" (tests, notebooks).
_LOCAL_SCHEDULERS = ("sync", "synchronous", "single-threaded", "threads", "threading")


def dask() -> Any:
    """`dask`, or a MissingDependencyError naming the extra."""
    require("dask.dataframe", "dask", "Headwater's data library", package="dask")
    import dask

    return dask


def resolve_client(client: Any) -> Any:
    """The client to compute on: `client`, else None when `dask.config` names a local scheduler
    (`dask.config.set(scheduler="synchronous")`), else `headwater.compute.get_client()`."""
    if client is not None:
        return client
    if dask().config.get("scheduler", None) in _LOCAL_SCHEDULERS:
        return None
    from headwater.compute import get_client

    return get_client()


def choose_backend(client: Any, backend: str | None) -> str:
    """`backend` checked, or (None) "cudf" when every worker has a GPU and cuDF, else "pandas".

    Raises:
        InvalidArgumentError: `backend` is not one of BACKENDS.
        MissingDependencyError: "cudf" asked for where dask_cudf is not installed.
    """
    if backend is None or backend == "auto":
        if client is None:
            return "pandas"
        from headwater.compute import gpu_workers

        return "cudf" if gpu_workers(client) else "pandas"
    if backend not in BACKENDS:
        raise InvalidArgumentError(
            f"unknown backend {backend!r} (known: auto, {', '.join(BACKENDS)})"
        )
    if backend == "cudf":
        require(
            "dask_cudf",
            "gpu",
            "backend 'cudf' (RAPIDS cuDF, on an NVIDIA GPU)",
            install="pip install 'headwater[gpu]' plus cudf/dask-cudf for your CUDA version",
        )
    return backend


@contextlib.contextmanager
def dataframe_backend(backend: str) -> Iterator[None]:
    """Build Dask DataFrames on `backend` within the block ("cudf": dask_cudf collections)."""
    with dask().config.set({"dataframe.backend": backend}):
        yield


def compute(*collections: Any, client: Any) -> tuple[Any, ...]:
    """Compute on `client` with Headwater's paused-worker watchdog, or here when it is None."""
    if client is None:
        return tuple(dask().compute(*collections))
    from headwater.compute import compute as watched

    return tuple(watched(*collections, client=client))
