"""`RunRecorder`, what a run writes and reads of the store, and `open_run_stores`, which opens it.

A run needs the metadata store for two things (ADR 16): the recorder's writes (the run, its
executions, artifacts, events, metrics and step metrics, in batches) and the engine's two
per-task reads (the cache lookup, an input's recorded digest). Those form `RunRecorder`, which both
`SqlMetadataStore` and `lite.SqliteWriter` implement. Everything else a run may need (a
resume reads the run it resumes and claims it) is the full `MetadataStore`.

`open_run_stores` returns both as `RunStores`: for a SQLite file that exists at the newest
schema, the recorder is a `SqliteWriter` and the full store opens on first use, so a run
never imports SQLAlchemy; for any other store (another URL, a file to create or migrate, a
`MetadataStore` the caller passed) both are that one store, opened at once, so a bad store is
still refused before the run starts. Either way runs whose engine died are marked
INTERRUPTED: by the writer when it first connects, or when the full store opens.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from headwater.metadata.base import (
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    MetadataStore,
    RunRecord,
    StepSeriesRecord,
)


@runtime_checkable
class RunRecorder(Protocol):
    """The writes a run makes and the two reads its engine makes; see `MetadataStore` for
    what each method does. Implemented by `SqlMetadataStore` and `lite.SqliteWriter`."""

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None: ...

    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None: ...

    def record_execution(self, execution: ExecutionRecord) -> int: ...

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]: ...

    def record_artifact(self, artifact: ArtifactRecord) -> int: ...

    def record_events(self, events: list[EventRecord]) -> None: ...

    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None: ...

    def record_step_metrics(self, series: list[StepSeriesRecord]) -> None: ...

    def get_artifact(self, ref: int | str) -> ArtifactRecord | None: ...

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None: ...

    def batch(self) -> contextlib.AbstractContextManager[None]: ...

    def close(self) -> None: ...


class FullStore:
    """The full `MetadataStore` of a run, opened by the first call (the others wait for it).

    Args:
        opener: Opens the store (and marks runs whose engine died INTERRUPTED).
    """

    def __init__(self, opener: Callable[[], MetadataStore]) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._store: MetadataStore | None = None

    @classmethod
    def of(cls, store: MetadataStore) -> FullStore:
        """A `FullStore` that is `store`, already open."""
        full = cls(lambda: store)
        full._store = store
        return full

    def __call__(self) -> MetadataStore:
        with self._lock:
            if self._store is None:
                self._store = self._opener()
            return self._store

    @property
    def is_open(self) -> bool:
        """True once the store is open."""
        return self._store is not None

    def close(self) -> None:
        """Close the store if it was opened."""
        if self._store is not None:
            self._store.close()


@dataclass(frozen=True)
class RunStores:
    """The metadata stores of one run.

    Attributes:
        recorder: What the recorder writes through and the engine reads (`RunRecorder`).
        full: The whole store, opened on first call (`FullStore`); the same store as
            `recorder` unless that is a `SqliteWriter`.
    """

    recorder: RunRecorder
    full: FullStore

    def close(self) -> None:
        """Release both stores' connections. A run never needs to: its stores close when
        they are collected."""
        self.recorder.close()
        self.full.close()


def open_run_stores(metadata: MetadataStore | RunStores | str | None) -> RunStores:
    """The stores a run records in, with runs whose engine died marked INTERRUPTED.

    Args:
        metadata: A `MetadataStore` (used as it is), stores opened already (returned as
            they are: `resume` opens them to claim the run, then runs it), a SQLAlchemy URL,
            or None for `$HEADWATER_METADATA_URL` (else SQLite at
            `$HEADWATER_HOME/metadata.db`).

    Raises:
        StorageError: The store cannot be opened (only where it is opened now: see the
            module docstring).
    """
    from headwater import config
    from headwater.metadata import follow_home, open_store
    from headwater.metadata.lite import SqliteWriter
    from headwater.metadata.reconcile import mark_dead_runs

    if isinstance(metadata, RunStores):
        return metadata
    if isinstance(metadata, MetadataStore):
        store = metadata
    else:
        url = metadata or config.metadata_url()
        follow_home(url)
        writer = SqliteWriter.for_url(url)
        if writer is not None:  # marks dead runs when it connects, and so does `full`

            def opener() -> MetadataStore:
                opened = open_store(url)
                mark_dead_runs(opened)
                return opened

            return RunStores(writer, FullStore(opener))
        store = open_store(metadata)
    mark_dead_runs(store)
    return RunStores(store, FullStore.of(store))
