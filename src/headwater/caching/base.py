"""The cache interface the engine calls before every cacheable executor task.

Implement `TaskCache` to plug a cache in::

    class MyCache(TaskCache):
        def fingerprint(self, *, launch):
            return cache_key(launch)          # see headwater.caching.keys
        def lookup(self, *, launch, key):
            return None                       # or CacheHit(outputs, source_execution_id)

Recording is not the cache's job: the metadata recorder stores every execution with its
key (but one whose outcome the task said is a failure, see `headwater.outcome`), and a later
`lookup` finds it there. A failure must never be a hit.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field

from headwater.task import Launch, Outputs


@dataclass
class CacheHit:
    """Outputs an earlier execution produced, to reuse instead of running the task."""

    outputs: Outputs
    source: int | None = None  # the execution id reused
    resumed: bool = False  # from the run being resumed, not from the cache
    #: Store ids of the reused artifacts by URI, so recording the hit needs no lookups.
    artifact_ids: dict[str, int] = field(default_factory=dict)


class TaskCache(abc.ABC):
    """Computes a task's cache key and finds earlier outputs for it."""

    @abc.abstractmethod
    def fingerprint(self, *, launch: Launch) -> str:
        """The task's cache key ('' when the task cannot be cached)."""

    @abc.abstractmethod
    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """Outputs of an earlier identical task, or None for a miss."""


class NullCache(TaskCache):
    """Never hits."""

    def fingerprint(self, *, launch: Launch) -> str:
        """No key."""
        return ""

    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """Always a miss."""
        return None
