"""Executors by name: the built-in ones, and any registered under `headwater.executors`.

A third party adds one with an entry point in its package metadata::

    [project.entry-points."headwater.executors"]
    threads = "mypackage.executors:ThreadExecutor"

The entry point loads a callable (usually the `Executor` subclass) that takes the run's
executor options as keyword arguments (always `scheduler`, `shared_fs` and `install_packages`,
and any other option the run was given by name; it may accept and ignore others with
`**options`) and returns an `Executor`. Built-in executors take only the options of their
dataclass in `executors/options.py`.
`headwater run --executor threads` then finds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from headwater.errors import UserError
from headwater.executors.base import Executor
from headwater.executors.options import DaskOptions, LocalOptions, option_names, options_of

GROUP = "headwater.executors"


def _local(options: Mapping[str, Any]) -> Executor:
    from headwater.executors.local import LocalExecutor
    from headwater.executors.prestart import take_spare

    settings = options_of(LocalOptions, "local", options)
    if settings.server is not None:  # `headwater run` and a server's worker start their own
        return LocalExecutor(server=settings.server, sandboxed=settings.sandboxed)
    # A run through the API: the next one in this process finds a warm fork server.
    spare = take_spare(sandboxed=settings.sandboxed)
    return LocalExecutor(server=spare, sandboxed=settings.sandboxed, spare=True)


def _dask(options: Mapping[str, Any]) -> Executor:
    from headwater.executors.dask import DaskExecutor

    settings = options_of(DaskOptions, "dask", options)
    return DaskExecutor(
        settings.scheduler,
        shared_fs=settings.shared_fs,
        install_packages=settings.install_packages,
    )


#: Built in, so that the common case never scans installed packages' metadata (~6 ms), each
#: with the dataclass of its options.
BUILTIN: dict[str, tuple[type[Any], Callable[[Mapping[str, Any]], Executor]]] = {
    "local": (LocalOptions, _local),
    "dask": (DaskOptions, _dask),
}

#: What a third party's factory is always given (the options the built-in executors share).
PLUGIN_DEFAULTS: dict[str, Any] = {"scheduler": None, "shared_fs": False, "install_packages": False}


def executor_names() -> list[str]:
    """Every executor name that `--executor` accepts here."""
    return sorted({*BUILTIN, *(ep.name for ep in _entry_points())})


def known_options(name: str) -> list[str] | None:
    """The options a built-in executor takes, sorted; None for a third party's (any)."""
    builtin = BUILTIN.get(name)
    return None if builtin is None else option_names(builtin[0])


def create_executor(name: str, **options: Any) -> Executor:
    """Make the executor called `name` with the run's options.

    A built-in executor takes the options of its dataclass (`LocalOptions`, `DaskOptions`);
    a third party's factory gets `PLUGIN_DEFAULTS` updated with `options` as keywords.

    Raises:
        UserError: No executor has that name (the message lists those that do), or a
            built-in one has no such option (the message lists those it has).
    """
    builtin = BUILTIN.get(name)
    if builtin is not None:
        return builtin[1](options)
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
            f"executor {name!r} ({found[0].value}) could not be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    executor = factory(**{**PLUGIN_DEFAULTS, **options})
    if not isinstance(executor, Executor):
        raise UserError(f"executor {name!r} made a {type(executor).__name__}, not an Executor")
    return executor


def _entry_points() -> list[Any]:
    import importlib.metadata

    return list(importlib.metadata.entry_points(group=GROUP))
