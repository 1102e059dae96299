"""The metadata store: runs, executions, artifacts, events and metrics, and their lineage.

`open_store()` opens the configured store for writing; `open_reader()` opens it for reading
without creating, migrating or writing anything. The SQL implementation (and SQLAlchemy) is
imported only then, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.errors import StorageError
from headwater.metadata.base import (
    EXECUTION_STATES,
    MODEL_STAGES,
    RUN_STATES,
    ArtifactRecord,
    Direction,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    MetadataStore,
    ModelRecord,
    RunRecord,
    StepSeriesRecord,
)

if TYPE_CHECKING:
    from headwater.metadata.sql import SqlMetadataStore

__all__ = [
    "EXECUTION_STATES",
    "MODEL_STAGES",
    "RUN_STATES",
    "ArtifactRecord",
    "Direction",
    "EventRecord",
    "ExecutionRecord",
    "LineageGraph",
    "MetadataStore",
    "ModelRecord",
    "RunRecord",
    "SqlMetadataStore",
    "StepSeriesRecord",
    "follow_home",
    "is_default_store",
    "open_reader",
    "open_store",
]


def open_store(url: str | None = None) -> MetadataStore:
    """Open the metadata store at `url` for writing, migrating its schema to the newest revision.

    Args:
        url: A SQLAlchemy URL. Default: `$HEADWATER_METADATA_URL`, else SQLite at
            `$HEADWATER_HOME/metadata.db`. Only the default store's directory is created on
            demand: any other missing directory is a typo to report, not a store to make.

    Raises:
        StorageError: The URL is malformed, its directory does not exist, or the database
            cannot be opened.
    """
    from headwater import config
    from headwater.metadata.sql import SqlMetadataStore

    url = url or config.metadata_url()
    if is_default_store(url):
        try:
            config.home().mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create HEADWATER_HOME {str(config.home())!r}: {exc.strerror}: "
                "set HEADWATER_HOME to a writable directory"
            ) from exc
    follow_home(url)
    return SqlMetadataStore(url)


def open_reader(url: str | None = None) -> MetadataStore | None:
    """Open the metadata store at `url` for reading only: nothing is created, migrated or written.

    Args:
        url: As for `open_store`.

    Returns:
        The store, or None where nothing has been recorded yet: the default store does not
        exist yet, or the database has no tables.

    Raises:
        StorageError: The URL is malformed; a SQLite file other than the default store does
            not exist; the database cannot be opened; or its schema is not the newest (a
            command that writes upgrades it).
    """
    from headwater import config
    from headwater.metadata.connect import sqlite_file
    from headwater.metadata.sql import SqlMetadataStore

    url = url or config.metadata_url()
    path = sqlite_file(url)
    if path is not None and not path.exists() and is_default_store(url):
        return None
    follow_home(url, reader=True)
    store = SqlMetadataStore(url, read_only=True)
    if not store.has_schema:
        store.close()
        return None
    return store


def follow_home(url: str, *, reader: bool = False) -> None:
    """If `url` is the default store and its `HEADWATER_HOME` was moved or copied, rewrite
    the paths it records under the old place (`headwater.metadata.relocate`). A `reader`
    writes only then: without it, nothing the store names could be found. Stdlib only: the
    run's own writes open no SQLAlchemy (ADR 16)."""
    from pathlib import Path
    from urllib.parse import unquote

    from headwater import config
    from headwater.metadata.relocate import follow_home as follow

    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return
    database = (config.home() / "metadata.db").expanduser().absolute()
    if Path(unquote(url[len(prefix) :])).absolute() == database:
        follow(config.home(), database, note_unmoved=not reader)


def is_default_store(url: str) -> bool:
    """True if `url` names the SQLite file `$HEADWATER_HOME/metadata.db`, the store that is
    created on demand."""
    from headwater import config
    from headwater.metadata.connect import sqlite_file

    path = sqlite_file(url)
    return path is not None and path == (config.home() / "metadata.db").expanduser().absolute()


def __getattr__(name: str) -> Any:
    if name == "SqlMetadataStore":
        from headwater.metadata.sql import SqlMetadataStore

        return SqlMetadataStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
