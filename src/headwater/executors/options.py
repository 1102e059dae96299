"""What each built-in executor can be told, as frozen dataclasses: an unknown option is an error.

`create_executor` builds these from the options a run passes by name, so a misspelt option
(`schedular=`) is refused in one line that names the options there are, instead of vanishing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from headwater.errors import UserError

if TYPE_CHECKING:
    from headwater.executors.prestart import PrestartedServer

__all__ = ["DaskOptions", "LocalOptions", "option_names", "options_of"]

T = TypeVar("T")


@dataclass(frozen=True)
class LocalOptions:
    """Options of the local executor (tasks in processes forked on this machine).

    Attributes:
        install_packages: Install missing `packages_to_install` (the engine does it here).
        server: A fork server started ahead of the executor (`headwater run` starts one while
            it loads), adopted instead of starting another.
        sandboxed: Its tasks run in sandboxes: the fork server, of which every task is a
            copy, starts without the machine's secrets (`sandbox.policy.fork_server_env`).
    """

    install_packages: bool = False
    server: PrestartedServer | None = None
    sandboxed: bool = False


@dataclass(frozen=True)
class DaskOptions:
    """Options of the Dask executor.

    Attributes:
        install_packages: Install missing `packages_to_install` on the workers.
        scheduler: The scheduler's address or a `distributed.Client` (default
            `$HEADWATER_DASK_SCHEDULER`, else a LocalCluster for the run).
        shared_fs: Every worker sees the local pipeline root at the same path (an NFS mount),
            so a local root is allowed.
    """

    install_packages: bool = False
    scheduler: Any = None
    shared_fs: bool = False


def option_names(kind: type[Any]) -> list[str]:
    """The option names of an options dataclass, sorted."""
    return sorted(f.name for f in dataclasses.fields(kind))


def options_of(kind: type[T], name: str, given: Mapping[str, Any]) -> T:
    """`kind` built from `given`, for the executor called `name`.

    Raises:
        UserError: `given` names an option that `kind` does not have.
    """
    known = option_names(kind)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise UserError(
            f"executor {name!r} has no option {unknown[0]!r} (its options: {', '.join(known)})"
        )
    return kind(**given)
