"""Caching: content-addressed keys and the stores the engine looks results up in."""

from headwater.caching.base import NullCache, TaskCache
from headwater.caching.store import FileTaskCache

__all__ = ["FileTaskCache", "NullCache", "TaskCache"]
