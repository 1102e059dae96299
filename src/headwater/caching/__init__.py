"""Caching: content-addressed keys, looked up in the metadata store."""

from headwater.caching.base import CacheHit, NullCache, TaskCache

__all__ = ["CacheHit", "NullCache", "TaskCache"]
