"""Opening the metadata store for the API: read-only for reads, migrated for writes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from headwater.metadata.base import MetadataStore

#: What API functions accept as `metadata=`: a store, a SQLAlchemy URL, or None (the default).
MetadataArg = MetadataStore | str | None


@contextlib.contextmanager
def reading(metadata: MetadataArg) -> Iterator[MetadataStore | None]:
    """The store to read, opened without creating or migrating it; None if nothing was
    recorded yet (the default store does not exist). A store passed in is used as is and
    left open.

    Raises:
        StorageError: The URL is bad, names a missing non-default SQLite file, or the store
            cannot be read (see `headwater.metadata.open_reader`).
    """
    if isinstance(metadata, MetadataStore):
        yield metadata
        return
    from headwater.metadata import open_reader

    store = open_reader(metadata)
    try:
        yield store
    finally:
        if store is not None:
            store.close()


@contextlib.contextmanager
def writing(metadata: MetadataArg) -> Iterator[MetadataStore | None]:
    """The store to change, migrated, with runs whose engine died recorded INTERRUPTED first
    (a writer makes that durable; readers only show it); None if the default store does not
    exist yet, which changing what it holds would not create. A store passed in is used as
    is and left open.

    Raises:
        StorageError: The store cannot be opened (see `headwater.metadata.open_store`).
    """
    from headwater.metadata.reconcile import mark_dead_runs

    if isinstance(metadata, MetadataStore):
        mark_dead_runs(metadata)
        yield metadata
        return
    from headwater import config
    from headwater.metadata import is_default_store, open_store
    from headwater.metadata.connect import sqlite_file

    url = metadata or config.metadata_url()
    path = sqlite_file(url)
    if is_default_store(url) and path is not None and not path.exists():
        yield None
        return
    store = open_store(url)
    try:
        mark_dead_runs(store)
        yield store
    finally:
        store.close()
