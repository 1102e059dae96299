"""Executors by name: the built-in ones, and any registered under `headwater.executors`.

A third party adds one with an entry point in its package metadata::

    [project.entry-points."headwater.executors"]
    threads = "mypackage.executors:ThreadExecutor"

The entry point loads a callable (usually the `Executor` subclass) that takes the run's
executor options as keyword arguments (`scheduler`, `shared_fs`, `install_packages`; it should
accept and ignore others with `**options`) and returns an `Executor`.
`headwater run --executor threads` then finds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.errors import UserError
from headwater.executors.base import Executor

GROUP = "headwater.executors"


def _local(**options: Any) -> Executor:
    from headwater.executors.local import LocalExecutor

    return LocalExecutor()


def _dask(**options: Any) -> Executor:
    from headwater.executors.dask import DaskExecutor

    return DaskExecutor(**options)


#: Built in, so that the common case never scans installed packages' metadata (~6 ms).
BUILTIN: dict[str, Callable[..., Executor]] = {"local": _local, "dask": _dask}


def executor_names() -> list[str]:
    """Every executor name that `--executor` accepts here."""
    return sorted({*BUILTIN, *(ep.name for ep in _entry_points())})


def create_executor(name: str, **options: Any) -> Executor:
    """Make the executor called `name` with the run's options.

    Raises:
        UserError: No executor has that name (the message lists those that do).
    """
    factory = BUILTIN.get(name)
    if factory is None:
        found = [ep for ep in _entry_points() if ep.name == name]
        if not found:
            raise UserError(
                f"unknown executor {name!r}: use one of {', '.join(executor_names())} (or "
                f"install a package that registers {name!r} in the {GROUP!r} entry points)"
            )
        try:
            factory = found[0].load()
        except Exception as exc:  # a third party's import error: name it, do not crash
            raise UserError(
                f"executor {name!r} ({found[0].value}) could not be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    executor = factory(**options)
    if not isinstance(executor, Executor):
        raise UserError(f"executor {name!r} made a {type(executor).__name__}, not an Executor")
    return executor


def _entry_points() -> list[Any]:
    import importlib.metadata

    return list(importlib.metadata.entry_points(group=GROUP))
