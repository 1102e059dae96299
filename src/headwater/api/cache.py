"""The task cache: forget what it holds."""

from __future__ import annotations

from headwater.api._store import MetadataArg, writing

__all__ = ["clear_cache"]


def clear_cache(*, metadata: MetadataArg = None) -> int:
    """Forget every cached task result, so each task runs again once; runs and their
    artifacts stay.

    Args:
        metadata: A `MetadataStore`, a SQLAlchemy URL, or None for the default store.

    Returns:
        How many cached results were forgotten.
    """
    with writing(metadata) as store:
        return 0 if store is None else store.clear_cache()
