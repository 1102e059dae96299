"""`SqlStoreBase`: what every part of `SqlMetadataStore` stands on, its open database."""

from __future__ import annotations

import contextlib
from typing import Self

from headwater.metadata.base import MetadataStore
from headwater.metadata.connect import Database


class SqlStoreBase(MetadataStore):
    """An open `connect.Database`, its transactions, and closing it.

    The record kinds (`runs`, `artifacts`, `registry`, `endpoints`) each subclass this;
    `SqlMetadataStore` combines them.

    Args:
        url: A SQLAlchemy URL (see `SqlMetadataStore`).
        read_only: Neither create nor migrate the database (see `metadata.open_reader`).
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self._db = Database(url, read_only=read_only)
        #: False when a read-only store found no tables: nothing was ever recorded there.
        self.has_schema = self._db.has_schema
        self.url = self._db.url
        self._engine = self._db.engine  # for diagnostics: its dialect, its connections
        # Runs this store saw an execution inserted for: no need to check they exist again.
        self._runs_seen: set[str] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self.url!r})"

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """This thread's writes inside the block share one transaction (one commit)."""
        return self._db.batch()

    def close(self) -> None:
        """Release connections. A file or server store reconnects if used again; an
        in-memory one is gone."""
        self._db.dispose()
