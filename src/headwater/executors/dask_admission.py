"""Admission to a Dask cluster: a task's resource request matched against the workers'."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from headwater.errors import ResourceError

if TYPE_CHECKING:
    from headwater.task import Launch


class ResourceMatcher(Protocol):
    """What admission asks of the executor (`DaskExecutor` is one): the Dask resources a
    task asks of a worker, and keeping them for its submission."""

    def resources_for(
        self, launch: Launch, *, strict: bool
    ) -> tuple[dict[str, float], str | None]: ...

    def remember(self, task_id: int, resources: Mapping[str, float]) -> None: ...


class DaskAdmission:
    """Admits tasks to a Dask cluster: the workers' resources decide, Dask queues the rest.

    Every admitted task is submitted at once (Dask's scheduler runs it when a worker has a
    thread and the resources free); only `--max-parallel`, when given, holds tasks back here.
    """

    def __init__(self, executor: ResourceMatcher, *, max_parallel: int | None, strict: bool):
        self._executor = executor
        self._slots = max_parallel
        self._strict = strict
        self._held: set[int] = set()
        self._warned: set[str] = set()

    def check(self, launch: Launch) -> str | None:
        resources, warning = self._executor.resources_for(launch, strict=self._strict)
        self._executor.remember(launch.task_id, resources)
        if warning is None or launch.name in self._warned:
            return None
        self._warned.add(launch.name)
        return warning

    def try_acquire(self, launch: Launch) -> bool:
        if self._slots is not None and len(self._held) >= self._slots:
            return False
        self._held.add(launch.task_id)
        return True

    def device_env(self, task_id: int) -> dict[str, str]:
        return {}  # a worker shows its tasks its own GPUs (a LocalCUDACluster sets each's)

    def release(self, task_id: int) -> None:
        self._held.discard(task_id)


def match_resources(
    launch: Launch, workers: dict[str, dict[str, Any]], *, address: str, strict: bool
) -> tuple[dict[str, float], str | None]:
    """The Dask resources `launch` asks of a worker, and a warning to show (or None).

    Args:
        launch: The attempt whose `resources` are matched.
        workers: The scheduler's worker information (`scheduler_info()["workers"]`).
        address: The scheduler's address, named when no worker can run the task.
        strict: Refuse a task asking for accelerators when no worker advertises any.

    Returns:
        The Dask resources to submit the attempt with, and a warning to show (or None).

    Raises:
        ResourceError: No worker can ever meet the request (or, with `strict`, a task
            asks for accelerators and no worker has any).
    """
    req = launch.resources
    offered: dict[str, float] = {}
    for w in workers.values():
        for name, amount in (w.get("resources") or {}).items():
            offered[name] = max(offered.get(name, 0.0), float(amount))
    threads = max((float(w.get("nthreads") or 0) for w in workers.values()), default=0.0)
    memory = max((float(w.get("memory_limit") or 0) for w in workers.values()), default=0.0)
    wanted: dict[str, float] = {}
    short: list[str] = []
    if req.cpu:
        if "CPU" in offered:
            wanted["CPU"] = req.cpu
            if req.cpu > offered["CPU"]:
                short.append(f"{req.cpu:g} CPUs (the largest worker offers CPU={offered['CPU']:g})")
        elif req.cpu > threads:
            short.append(f"{req.cpu:g} CPUs (the largest worker has {threads:g} threads)")
    if req.memory:
        if "MEMORY" in offered:
            wanted["MEMORY"] = req.memory
            if req.memory > offered["MEMORY"]:
                short.append(
                    f"{_gib(req.memory)} of memory (the largest worker offers "
                    f"MEMORY={_gib(offered['MEMORY'])})"
                )
        elif memory and req.memory > memory:
            short.append(
                f"{_gib(req.memory)} of memory (the largest worker's limit is {_gib(memory)})"
            )
    warning = None
    if req.accelerators:
        kind = req.accelerator_type or "GPU"
        if offered.get("GPU", 0.0) > 0:
            wanted["GPU"] = float(req.accelerators)
            if req.accelerators > offered["GPU"]:
                short.append(
                    f"{req.accelerators} accelerator(s) of type {kind!r} (the largest "
                    f"worker offers GPU={offered['GPU']:g})"
                )
        elif strict:
            raise ResourceError(
                f"task {launch.name!r} requests {req.accelerators} accelerator(s) of type "
                f"{kind!r} but no Dask worker advertises any: start workers with "
                '--resources "GPU=1", or run without --strict-resources'
            )
        else:
            warning = (
                f"task {launch.name!r} requests {req.accelerators} accelerator(s) of type "
                f"{kind!r} but no Dask worker advertises any (GPU): running it without "
                "(--strict-resources refuses it)"
            )
    if short:
        raise ResourceError(
            f"task {launch.name!r} requests {', '.join(short)}: no worker of the Dask "
            f"cluster at {address} can run it; add a larger worker, or lower the request"
        )
    return wanted, warning


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"
