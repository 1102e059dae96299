"""`SqlMetadataStore`: the metadata store on SQLite (the default) or PostgreSQL, via SQLAlchemy.

The store's methods are Core statements over the tables in `schema`, each in one
transaction of a `connect.Database` (which opens, migrates, and retries locked writes),
written in one module per kind of record: `runs` (runs and executions), `queue` (the state
changes a run queue makes), `artifacts` (artifacts, events, metrics, the cache lookup and
lineage), `registry` (models), `endpoints`, `experiments`, `pipelines` (named pipelines and
their versions), `schedules` (recurring runs), `principals` (tokens and proxy users) and
`pages` (a page of any of them). Reads shared with the lineage walk are in `queries`, the walk
itself in `lineage`.
"""

from __future__ import annotations

from headwater.metadata.connect import mask_url, sqlite_file
from headwater.metadata.encoding import ir_digest
from headwater.metadata.sql.artifacts import ArtifactRecords
from headwater.metadata.sql.endpoints import EndpointRecords
from headwater.metadata.sql.experiments import ExperimentRecords
from headwater.metadata.sql.pages import PageRecords
from headwater.metadata.sql.pipelines import PipelineRecords
from headwater.metadata.sql.principals import PrincipalRecords
from headwater.metadata.sql.queue import RunQueueRecords
from headwater.metadata.sql.registry import ModelRegistry
from headwater.metadata.sql.runs import RunRecords
from headwater.metadata.sql.schedules import RecurringRunRecords

# `mask_url` and `sqlite_file` live in `connect`; they stay importable from here.
__all__ = ["SqlMetadataStore", "ir_digest", "mask_url", "sqlite_file"]


class SqlMetadataStore(
    RunRecords,
    RunQueueRecords,
    ArtifactRecords,
    ModelRegistry,
    EndpointRecords,
    ExperimentRecords,
    PipelineRecords,
    RecurringRunRecords,
    PrincipalRecords,
    PageRecords,
):
    """A `MetadataStore` in a SQL database (SQLite or PostgreSQL).

    Args:
        url: A SQLAlchemy URL: `sqlite:////abs/path/metadata.db`, `sqlite://` (in memory,
            for tests), or `postgresql+psycopg://user:pw@host/db` (`postgresql://` uses
            psycopg 3 when psycopg2 is not installed).
        read_only: Neither create nor migrate the database (see `metadata.open_reader`).

    Raises:
        StorageError: The URL is malformed, names an unknown database or a missing driver,
            or the database cannot be reached or was made by a newer Headwater.

    Example::

        with SqlMetadataStore("sqlite:////tmp/md.db") as store:
            print([r.run_id for r in store.list_runs(limit=5)])
    """
