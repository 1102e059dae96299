"""The cache interface the engine calls before and after every cacheable executor task.

Implement `TaskCache` to plug a cache in::

    class MyCache(TaskCache):
        def lookup(self, *, launch):
            return None  # or the Outputs of an earlier identical run
        def record(self, *, launch, outputs):
            ...
"""

from __future__ import annotations

import abc

from headwater.engine.model import Launch, Outputs


class TaskCache(abc.ABC):
    """Finds earlier outputs for a task about to run, and remembers new ones."""

    @abc.abstractmethod
    def lookup(self, *, launch: Launch) -> Outputs | None:
        """Outputs of an earlier identical task, or None for a miss."""

    @abc.abstractmethod
    def record(self, *, launch: Launch, outputs: Outputs) -> None:
        """Remember the outputs of a task that just succeeded."""


class NullCache(TaskCache):
    """Never hits; the engine's default until a cache store is configured."""

    def lookup(self, *, launch: Launch) -> Outputs | None:
        """Always a miss."""
        return None

    def record(self, *, launch: Launch, outputs: Outputs) -> None:
        """Remember nothing."""
