"""The `Executor` interface: where executor tasks run, and who admits them there.

To add a backend, subclass `Executor` and implement `submit`, `wait`, `running`, `cancel` and
`shutdown`::

    class ThreadExecutor(Executor):
        name = "threads"
        def submit(self, launch):  # start it, do not block
            ...
        def wait(self, timeout):   # block up to `timeout` s; return finished attempts
            ...
        def running(self):         # attempts in flight
            ...
        def cancel(self):          # terminate every attempt in flight
            ...
        def shutdown(self, *, kill=False):
            ...

and make it findable by name through the `headwater.executors` entry point group (see
`headwater.executors.registry`), so that `headwater run --executor threads` uses it.

Each attempt's outcome comes back in-band, as a `TaskResult`: outputs on success (parameter
values and artifact URIs), a structured `TaskError` otherwise, where its log went, and which
worker ran it. An executor may run tasks anywhere: it chooses their scratch space; what must
outlive the task goes to the pipeline root (artifacts) or back in the result.

An executor outlives runs: the engine never shuts down an executor it was given, so one
`LocalExecutor` (and its warm fork server) can serve many runs in a notebook.
"""

from __future__ import annotations

import abc
from typing import Protocol

from headwater.task import Launch, TaskResult


class Admission(Protocol):
    """Decides when a ready task may start: the executor's view of its capacity."""

    def check(self, launch: Launch) -> str | None:
        """Refuse (raise ResourceError) a task that can never run; else a warning or None."""

    def try_acquire(self, launch: Launch) -> bool:
        """Take what `launch` needs if it is free now; return whether it may start.

        The answer depends on `launch.resources` and on what is held only: once a request
        was refused, the engine does not ask again for the same request until a task ends.
        """

    def device_env(self, task_id: int) -> dict[str, str]:
        """The environment that shows an admitted task its devices ({} when none)."""

    def release(self, task_id: int) -> None:
        """Give back what `task_id` held."""


class Executor(abc.ABC):
    """Runs launches concurrently and reports each one's result exactly once."""

    #: The name runs record for the tasks this executor ran (`--executor NAME`).
    name = "executor"
    #: Whether `packages_to_install` are resolved where the tasks run (not by the engine).
    resolves_packages = False

    @abc.abstractmethod
    def submit(self, launch: Launch) -> None:
        """Start one attempt of a task without blocking."""

    @abc.abstractmethod
    def wait(self, timeout: float | None) -> list[TaskResult]:
        """Block until at least one attempt ends or `timeout` seconds pass; return the ended."""

    @abc.abstractmethod
    def running(self) -> int:
        """How many attempts are in flight."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Terminate every attempt in flight; their results are never reported."""

    @abc.abstractmethod
    def shutdown(self, *, kill: bool = False) -> None:
        """Release workers; with `kill`, terminate attempts still running."""

    def admission(self, *, max_parallel: int | None, strict: bool) -> Admission:
        """Who admits tasks to this executor; by default, this machine's resource pool.

        Args:
            max_parallel: Most tasks at once (`--max-parallel`); None for the default.
            strict: Refuse requests larger than what the tasks can have (`--strict-resources`).
        """
        from headwater.executors.admission import machine_pool

        return machine_pool(max_parallel=max_parallel, strict=strict)

    def describe(self) -> str | None:
        """One line on where tasks run (a cluster and its dashboard), or None to say nothing."""
        return None

    def check_root(self, root: str) -> None:
        """Refuse (raise UserError) a pipeline root the tasks cannot reach; by default, none."""
        del root  # every task of a one-machine executor sees what the engine sees

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(kill=True)
