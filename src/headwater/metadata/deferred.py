"""`DeferredSqlStore`: a SQLite store that a run uses without SQLAlchemy (ADRs 8 and 16).

Importing SQLAlchemy and opening the store took more CPU than everything else `headwater run`
does. A run needs the store for two things only: the recorder's writes, on its own thread,
and the engine's per-task reads (a cache lookup, the recorded digest of an input artifact).
So when the store is a SQLite file that exists and is at the newest schema, as the default
store is after its first run, the engine gets this wrapper:

* the recorder's writes (the run, its executions, artifacts, events and metrics) and their
  `batch()` are made by `lite.SqliteWriter` on the standard library's `sqlite3`, with the
  same rows and errors as `SqlMetadataStore` (ADR 16);
* `cached_outputs` and `get_artifact` read the same rows `SqlMetadataStore` reads, on a
  connection of their own (WAL: never behind the writer's transaction);
* everything else opens the real `SqlMetadataStore` on first use (and marks runs whose
  engine died INTERRUPTED, as the writer also does on its first write).

So a run never imports SQLAlchemy unless something outside a run's path asks for it.
Anything else (another URL, a missing file, an older or newer schema, any error while
probing) opens the store at once, as before, so a bad store is still refused before a run
starts.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import unquote

from headwater.metadata.base import (
    SCHEMA_HEAD,
    ArtifactRecord,
    Direction,
    EndpointRecord,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    MetadataStore,
    ModelRecord,
    RunRecord,
)
from headwater.metadata.lite import SqliteWriter, read_artifact, read_cached

T = TypeVar("T")

#: A SQLite URL with an absolute path and no options: the only kind probed without SQLAlchemy.
_PREFIX = "sqlite:////"


class DeferredSqlStore(MetadataStore):
    """A `SqlMetadataStore` for an existing, current SQLite file, opened on first use.

    Make one with `DeferredSqlStore.for_url`, which returns None where a deferred open
    would not be safe. The recorder's writes go to a `SqliteWriter`, `cached_outputs` and
    `get_artifact` read SQLite directly, and every other method waits for the real store.
    """

    def __init__(self, url: str, probe: sqlite3.Connection) -> None:
        self.url = url
        self._writer = SqliteWriter(_path(url), url)
        self._probe: sqlite3.Connection | None = probe
        self._probe_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._real: MetadataStore | None = None
        # Runs that never call close() (the engine's store lives as long as its run) still
        # close the probe, without a ResourceWarning, when the store is collected.
        weakref.finalize(self, probe.close)
        weakref.finalize(self, self._writer.close)

    @classmethod
    def for_url(cls, url: str) -> DeferredSqlStore | None:
        """A deferred store for `url`, or None if it must be opened now.

        Deferred only for `sqlite:////absolute/path` (no query options) naming a database
        file that exists and whose schema is `SCHEMA_HEAD`: opening it later can then neither
        create, migrate nor refuse anything that opening it now would have.
        """
        if not url.startswith(_PREFIX) or "?" in url:
            return None
        path = _path(url)
        if not path.is_file():
            return None
        try:
            probe = sqlite3.connect(
                f"{path.as_uri()}?mode=rw", uri=True, timeout=30, check_same_thread=False
            )
            probe.isolation_level = None  # reads BEGIN and COMMIT themselves
        except sqlite3.Error:
            return None
        try:
            rows = probe.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error:
            rows = []
        if rows != [(SCHEMA_HEAD,)]:
            probe.close()
            return None
        return cls(url, probe)

    def opened(self) -> MetadataStore:
        """The real store, opened by the first caller (the others wait for it)."""
        with self._open_lock:
            if self._real is None:
                from headwater.metadata import open_store
                from headwater.metadata.reconcile import mark_dead_runs

                store = open_store(self.url)
                mark_dead_runs(store)
                self._real = store
            return self._real

    def __repr__(self) -> str:
        return repr(self._real) if self._real is not None else f"SqlMetadataStore({self.url!r})"

    # -- the engine's hot path ---------------------------------------------------------------

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
        """The real store's lookup, read from SQLite without SQLAlchemy."""
        if not cache_key:
            return None
        return self._read(lambda probe: read_cached(probe, cache_key), "cached_outputs", cache_key)

    def get_artifact(self, ref: int | str) -> ArtifactRecord | None:
        return self._read(lambda probe: read_artifact(probe, ref), "get_artifact", ref)

    def _read(self, read: Callable[[sqlite3.Connection], T], method: str, arg: Any) -> T:
        """`read` in one transaction on the probe connection, never behind the writer's
        transaction (WAL); on the thread inside the writer's `batch()` (which must see its
        own writes), or if the probe fails, the writer's `method(arg)` answers instead."""
        if not self._writer.batching_here():
            with self._probe_lock:
                if self._probe is not None:
                    try:
                        self._probe.execute("BEGIN")
                        try:
                            return read(self._probe)
                        finally:
                            self._probe.execute("COMMIT")
                    except sqlite3.Error:
                        pass
        return cast(T, getattr(self._writer, method)(arg))

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """The writer's batch: the recorder's writes all go through it (none through the
        real store, whose connection would wait on this transaction's lock)."""
        return self._writer.batch()

    def close(self) -> None:
        with self._probe_lock:
            if self._probe is not None:
                self._probe.close()
                self._probe = None
        self._writer.close()
        if self._real is not None:
            self._real.close()

    # -- everything else: the real store -----------------------------------------------------

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        self._writer.create_run(run, ir=ir)

    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
    ) -> None:
        self._writer.finish_run(
            run_id, state=state, outputs=outputs, error=error, finished_at=finished_at
        )

    def claim_run(self, run_id: str, *, engine_host: str, engine_pid: int) -> RunRecord:
        return self.opened().claim_run(run_id, engine_host=engine_host, engine_pid=engine_pid)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.opened().get_run(run_id)

    def get_pipeline_ir(self, run_id: str) -> dict[str, Any] | None:
        return self.opened().get_pipeline_ir(run_id)

    def list_runs(
        self,
        *,
        pipeline: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        text: str | None = None,
    ) -> list[RunRecord]:
        return self.opened().list_runs(
            pipeline=pipeline, state=state, limit=limit, offset=offset, text=text
        )

    def delete_run(self, run_id: str) -> list[str]:
        return self.opened().delete_run(run_id)

    def running_runs(self) -> list[RunRecord]:
        return self.opened().running_runs()

    def mark_interrupted(
        self,
        run_id: str,
        *,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None:
        self.opened().mark_interrupted(
            run_id, finished_at=finished_at, engine_host=engine_host, engine_pid=engine_pid
        )

    def record_execution(self, execution: ExecutionRecord) -> int:
        return self._writer.record_execution(execution)

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]:
        return self._writer.insert_executions(executions)

    def list_executions(self, run_id: str) -> list[ExecutionRecord]:
        return self.opened().list_executions(run_id)

    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        return self.opened().get_execution(execution_id)

    def record_artifact(self, artifact: ArtifactRecord) -> int:
        return self._writer.record_artifact(artifact)

    def record_event(self, event: EventRecord) -> None:
        self._writer.record_event(event)

    def record_events(self, events: list[EventRecord]) -> None:
        self._writer.record_events(events)

    def artifacts_of_many(
        self, execution_ids: list[int]
    ) -> dict[int, list[tuple[EventRecord, ArtifactRecord]]]:
        return self.opened().artifacts_of_many(execution_ids)

    def artifacts_of(self, execution_id: int) -> list[tuple[EventRecord, ArtifactRecord]]:
        return self.opened().artifacts_of(execution_id)

    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None:
        self._writer.record_metrics(run_id, execution_id, artifact_id, metrics)

    def find_cached(self, cache_key: str) -> ExecutionRecord | None:
        return self.opened().find_cached(cache_key)

    def clear_cache(self) -> int:
        return self.opened().clear_cache()

    def lineage(
        self, ref: int | str, *, direction: Direction = "both", depth: int = 10
    ) -> LineageGraph:
        return self.opened().lineage(ref, direction=direction, depth=depth)

    def register_model(self, model: ModelRecord) -> tuple[ModelRecord, bool]:
        return self.opened().register_model(model)

    def list_models(self, *, name: str | None = None) -> list[ModelRecord]:
        return self.opened().list_models(name=name)

    def get_model(self, name: str, version: int | None = None) -> ModelRecord | None:
        return self.opened().get_model(name, version)

    def promote_model(
        self, name: str, version: int, stage: str
    ) -> tuple[ModelRecord, list[ModelRecord]]:
        return self.opened().promote_model(name, version, stage)

    def save_endpoint(self, endpoint: EndpointRecord) -> EndpointRecord:
        return self.opened().save_endpoint(endpoint)

    def list_endpoints(self) -> list[EndpointRecord]:
        return self.opened().list_endpoints()

    def get_endpoint(self, name: str) -> EndpointRecord | None:
        return self.opened().get_endpoint(name)


def _path(url: str) -> Path:
    """The file a `sqlite:////absolute/path` URL names, percent-decoded as SQLAlchemy does."""
    return Path(unquote(url[len(_PREFIX) - 1 :]))
