"""Caching: the interface the engine calls; keys and stores plug in behind it."""

from headwater.caching.base import NullCache, TaskCache

__all__ = ["NullCache", "TaskCache"]
