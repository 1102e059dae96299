"""The metadata store: runs, executions, artifacts, events and metrics, and their lineage.

`open_store()` opens the configured store; the SQL implementation (and SQLAlchemy) is
imported only then, so importing this package stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.metadata.base import (
    EXECUTION_STATES,
    RUN_STATES,
    ArtifactRecord,
    Direction,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    MetadataStore,
    RunRecord,
)

if TYPE_CHECKING:
    from headwater.metadata.sql import SqlMetadataStore

__all__ = [
    "EXECUTION_STATES",
    "RUN_STATES",
    "ArtifactRecord",
    "Direction",
    "EventRecord",
    "ExecutionRecord",
    "LineageGraph",
    "MetadataStore",
    "RunRecord",
    "SqlMetadataStore",
    "open_store",
]


def open_store(url: str | None = None) -> MetadataStore:
    """Open the metadata store at `url`, migrating its schema to the newest revision.

    Args:
        url: A SQLAlchemy URL. Default: `$HEADWATER_METADATA_URL`, else SQLite at
            `$HEADWATER_HOME/metadata.db`. The directory of a SQLite file is created.

    Raises:
        StorageError: The URL is malformed or the database cannot be opened.
    """
    from headwater import config
    from headwater.metadata.connect import sqlite_file
    from headwater.metadata.sql import SqlMetadataStore

    url = url or config.metadata_url()
    path = sqlite_file(url)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return SqlMetadataStore(url)


def __getattr__(name: str) -> Any:
    if name == "SqlMetadataStore":
        from headwater.metadata.sql import SqlMetadataStore

        return SqlMetadataStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
