"""The `Executor` interface: where executor tasks run.

To add a backend, subclass `Executor` and implement `submit`, `wait` and `shutdown`::

    class ThreadExecutor(Executor):
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

An executor outlives runs: the engine never shuts down an executor it was given, so one
`LocalExecutor` (and its warm fork server) can serve many runs in a notebook.
"""

from __future__ import annotations

import abc

from headwater.task import Launch, TaskResult


class Executor(abc.ABC):
    """Runs launches concurrently and reports each one's result exactly once."""

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

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(kill=True)
