"""Where the data functions compute: Polars in this process, or pandas or cuDF on Dask.

`plan` decides, before any cluster starts (ADR 70): with no cluster given (no `client`, no
`HEADWATER_DASK_SCHEDULER`, no local scheduler named in `dask.config`), no GPU with cuDF here, local
files and Polars installed, the work runs on Polars' streaming engine in this process. Anywhere
else it runs on Dask as before: cuDF when every worker has a GPU, else pandas. `backend=`
forces one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from headwater._deps import require
from headwater.errors import InvalidArgumentError

T = TypeVar("T")
BACKENDS = ("pandas", "cudf", "polars")
#: The backend that computes in this process, without Dask.
POLARS = "polars"
#: `dask.config` schedulers that mean "compute here, without a cluster" (tests, notebooks).
_LOCAL_SCHEDULERS = ("sync", "synchronous", "single-threaded", "threads", "threading")


def dask() -> Any:
    """`dask`, or a MissingDependencyError naming the extra."""
    require("dask.dataframe", "dask", "Headwater's data library", package="dask")
    import dask

    return dask


@dataclass(frozen=True)
class Plan:
    """Where a data function computes: `backend`, on `client` (None: here)."""

    backend: str
    client: Any = None

    @property
    def local(self) -> bool:
        """True when the work runs in this process on Polars, without Dask."""
        return self.backend == POLARS


def plan(client: Any, backend: str | None, *urls: str) -> Plan:
    """Where to compute the work on `urls`: see the module's docstring.

    Raises:
        InvalidArgumentError: An unknown `backend`, or "polars" for a URL that is not a
            local path.
        MissingDependencyError: A backend asked for whose library is not installed.
    """
    if backend is None or backend == "auto":
        if client is None and _one_machine() and _all_local(urls) and _have("polars"):
            return Plan(POLARS)
        client = resolve_client(client)
        return Plan(choose_backend(client, None), client)
    if backend == POLARS:
        require("polars", "data", "backend 'polars'", package="polars")
        if not _all_local(urls):
            remote = next(u for u in urls if not _is_local_url(u))
            raise InvalidArgumentError(
                f"backend 'polars' reads and writes local paths only, not {remote!r}: use "
                "backend='pandas' (Dask) for object stores"
            )
        return Plan(POLARS)
    checked = choose_backend(None, backend)  # unknown or missing library: refused before a cluster
    return Plan(checked, resolve_client(client))


def _one_machine() -> bool:
    """No cluster given (no run scheduler, no Dask scheduler named in `dask.config`), and no
    GPU here that cuDF could use (without cuDF, Dask would compute on pandas anyway)."""
    from headwater import config
    from headwater.machine import detect_gpus

    if config.dask_scheduler() or (_have("cudf") and detect_gpus()):
        return False
    if not _have("dask"):
        return True
    import dask

    return dask.config.get("scheduler", None) is None


def _have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _is_local_url(url: str) -> bool:
    return "://" not in url or url.startswith(("file://", "local://"))


def _all_local(urls: tuple[str, ...]) -> bool:
    return all(_is_local_url(u) for u in urls)


def run_each(where: Plan, function: Callable[..., T], calls: list[tuple[Any, ...]]) -> list[T]:
    """`function(*args)` for each args of `calls`, in order: on threads here when `where` is
    local (each call is Arrow and NumPy work, which releases the GIL), else as Dask tasks."""
    if where.local:
        from concurrent.futures import ThreadPoolExecutor

        from headwater.machine import machine_cpus

        with ThreadPoolExecutor(max_workers=max(1, min(len(calls), machine_cpus()))) as pool:
            return list(pool.map(lambda args: function(*args), calls))
    delayed = dask().delayed
    (found,) = compute([delayed(function, pure=True)(*args) for args in calls], client=where.client)
    return list(found)


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
    """`backend` checked, or (None) "cudf" when every worker has a GPU and cuDF, else "pandas"
    (`client` None: "pandas").

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
