"""`SqlMetadataStore`: the metadata store on SQLite (the default) or PostgreSQL, via SQLAlchemy.

The store's methods are Core statements over the tables in `schema`, each in one
transaction of a `connect.Database` (which opens, migrates, and retries locked writes);
reads shared with the lineage walk are in `queries`, the walk itself in `lineage`.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Literal, cast

from sqlalchemy import Connection, bindparam, delete, exists, insert, or_, select, update

from headwater.errors import InvalidArgumentError, NotFoundError, RunClaimedError, UserError
from headwater.metadata import models
from headwater.metadata.base import (
    ArtifactRecord,
    Direction,
    EndpointRecord,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    MetadataStore,
    ModelRecord,
    RunRecord,
    model_stage,
)
from headwater.metadata.connect import Database, mask_url, sqlite_file
from headwater.metadata.encoding import artifact_key, ir_digest
from headwater.metadata.lineage import lineage_graph
from headwater.metadata.queries import (
    artifact_record,
    chunks,
    execution_record,
    resolve_run_id,
    scalars,
    select_runs,
)
from headwater.metadata.reconcile import INTERRUPTED_TASK_ERROR
from headwater.metadata.schema import (
    ARTIFACTS,
    ENDPOINTS,
    EVENTS,
    EXECUTIONS,
    METRICS,
    MODELS,
    PIPELINES,
    RUNS,
)

# `mask_url` and `sqlite_file` live in `connect`; they stay importable from here.
__all__ = ["SqlMetadataStore", "ir_digest", "mask_url", "sqlite_file"]

_INTERRUPTED = INTERRUPTED_TASK_ERROR


class SqlMetadataStore(MetadataStore):
    """A `MetadataStore` in a SQL database (SQLite or PostgreSQL).

    Args:
        url: A SQLAlchemy URL: `sqlite:////abs/path/metadata.db`, `sqlite://` (in memory,
            for tests), or `postgresql+psycopg://user:pw@host/db` (`postgresql://` uses
            psycopg 3 when psycopg2 is not installed).

    Raises:
        StorageError: The URL is malformed, names an unknown database or a missing driver,
            or the database cannot be reached or was made by a newer Headwater.

    Example::

        with SqlMetadataStore("sqlite:////tmp/md.db") as store:
            print([r.run_id for r in store.list_runs(limit=5)])
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        # read_only: neither create nor migrate the database (see `metadata.open_reader`).
        self._db = Database(url, read_only=read_only)
        #: False when a read-only store found no tables: nothing was ever recorded there.
        self.has_schema = self._db.has_schema
        self.url = self._db.url
        self._engine = self._db.engine  # for diagnostics: its dialect, its connections
        # Runs this store saw an execution inserted for: no need to check they exist again.
        self._runs_seen: set[str] = set()

    def __enter__(self) -> SqlMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self.url!r})"

    # -- runs -----------------------------------------------------------------------------

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """Record a new run and its pipeline version (found or added by name and digest).

        An empty `run.pipeline_version` is replaced by the SHA-256 of the canonical IR.

        Raises:
            UserError: A run with this id exists already (resume it with `claim_run`).
        """
        version = run.pipeline_version or ir_digest(ir)
        now = run.created_at or time.time()

        def write(conn: Connection) -> None:
            if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run.run_id)).first():
                raise UserError(
                    f"run id {run.run_id!r} is taken by an earlier run: choose another id, "
                    "or resume that run"
                )
            pipeline_id = conn.execute(
                select(PIPELINES.c.id).where(
                    PIPELINES.c.name == run.pipeline, PIPELINES.c.version == version
                )
            ).scalar()
            if pipeline_id is None:
                pipeline_id = conn.execute(
                    insert(PIPELINES)
                    .values(name=run.pipeline, version=version, ir=ir, created_at=now)
                    .returning(PIPELINES.c.id)
                ).scalar_one()
            conn.execute(
                insert(RUNS).values(
                    run_id=run.run_id,
                    pipeline_id=pipeline_id,
                    state=run.state or "RUNNING",
                    parameters=run.parameters,
                    pipeline_root=run.pipeline_root,
                    created_at=now,
                    finished_at=run.finished_at,
                    outputs=run.outputs,
                    error=run.error,
                    engine_host=run.engine_host,
                    engine_pid=run.engine_pid,
                )
            )

        self._db.transaction(write, write=True)

    def claim_run(self, run_id: str, *, engine_host: str, engine_pid: int) -> RunRecord:
        """Take a FAILED or INTERRUPTED run for a new engine with one conditional UPDATE.

        `UPDATE runs SET state='RUNNING', ... WHERE run_id=? AND state IN ('FAILED',
        'INTERRUPTED')` claims the run only if it is still claimable when the database applies
        it: SQLite runs write transactions one at a time (`BEGIN IMMEDIATE`), and PostgreSQL
        re-checks the condition on the row a concurrent claim just committed, so exactly one
        of several engines updates one row. The others read who holds it, in the same
        transaction.

        Raises:
            NotFoundError: No run has this id.
            RunClaimedError: Another engine runs it (the message names it as pid@host).
            UserError: The run already SUCCEEDED.
        """

        def write(conn: Connection) -> RunRecord:
            claimed = conn.execute(
                update(RUNS)
                .where(RUNS.c.run_id == run_id, RUNS.c.state.in_(_CLAIMABLE))
                .values(
                    state="RUNNING",
                    finished_at=None,
                    error=None,
                    engine_host=engine_host,
                    engine_pid=engine_pid,
                )
            )
            runs = select_runs(conn, RUNS.c.run_id == run_id)
            if not runs:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            run = runs[0]
            if claimed.rowcount == 1:
                return run
            if run.state == "SUCCEEDED":
                raise UserError(f"run {run_id} already succeeded: there is nothing to resume")
            raise RunClaimedError(
                f"run {run_id} is already being run by engine {run.engine_pid}@"
                f"{run.engine_host} ({run.state}): wait for it to finish, or stop that engine "
                "and resume again"
            )

        return self._db.transaction(write, write=True)

    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
    ) -> None:
        """Set a run's final state, outputs and error.

        Raises:
            NotFoundError: No run has this id.
        """
        self._update_run(run_id, state=state, outputs=outputs, error=error, finished_at=finished_at)

    def _update_run(self, run_id: str, **values: Any) -> None:
        def write(conn: Connection) -> None:
            done = conn.execute(update(RUNS).where(RUNS.c.run_id == run_id).values(**values))
            if done.rowcount == 0:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")

        self._db.transaction(write, write=True)

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run with its metrics, or None; a unique prefix of the id also matches.

        Raises:
            NotFoundError: The prefix matches several runs (the message lists some).
        """

        def read(conn: Connection) -> RunRecord | None:
            full = resolve_run_id(conn, run_id)
            if full is None:
                return None
            runs = select_runs(conn, RUNS.c.run_id == full)
            return runs[0] if runs else None

        return self._db.transaction(read)

    def get_pipeline_ir(self, run_id: str) -> dict[str, Any] | None:
        """The IR the run executed, or None for an unknown run (a unique prefix matches)."""

        def read(conn: Connection) -> dict[str, Any] | None:
            full = resolve_run_id(conn, run_id)
            if full is None:
                return None
            query = (
                select(PIPELINES.c.ir)
                .join(RUNS, RUNS.c.pipeline_id == PIPELINES.c.id)
                .where(RUNS.c.run_id == full)
            )
            ir = conn.execute(query).scalar()
            return dict(ir) if ir is not None else None

        return self._db.transaction(read)

    def list_runs(
        self,
        *,
        pipeline: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        text: str | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, with their metrics; filtered by pipeline name, state and
        `text` (an id prefix, or part of the pipeline name or state, any case), the first
        `offset` skipped."""
        where = []
        if pipeline is not None:
            where.append(PIPELINES.c.name == pipeline)
        if state is not None:
            where.append(RUNS.c.state == state)
        if text:
            # ILIKE on PostgreSQL, lower() LIKE lower() on SQLite: the same on both.
            where.append(
                or_(
                    RUNS.c.run_id.istartswith(text, autoescape=True),
                    PIPELINES.c.name.icontains(text, autoescape=True),
                    RUNS.c.state.icontains(text, autoescape=True),
                )
            )
        return self._db.transaction(
            lambda conn: select_runs(conn, *where, limit=limit, offset=offset)
        )

    def running_runs(self) -> list[RunRecord]:
        """Runs still marked RUNNING, newest first."""
        return self._db.transaction(lambda conn: select_runs(conn, RUNS.c.state == "RUNNING"))

    def delete_run(self, run_id: str) -> list[str]:
        """Delete a run with its executions, events and metrics, and the artifacts only it used.

        The artifacts considered are those this run's executions produced, consumed or
        re-published (a cache hit's OUTPUT event). One goes unless an execution of another
        run produced it or has an event on it; those that stay lose their producer if it was
        here. An input no execution produced (made outside, or by a run deleted earlier) goes
        with the last run that used it, so callers must delete only files they own.

        Returns:
            The URIs of the deleted artifacts, for the caller to delete their files.

        Raises:
            NotFoundError: No run has exactly this id.
        """
        self._runs_seen.discard(run_id)

        def write(conn: Connection) -> list[str]:
            if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            here = select(EXECUTIONS.c.id).where(EXECUTIONS.c.run_id == run_id)
            ids = list(conn.execute(here).scalars())
            touched = scalars(conn, select(EVENTS.c.artifact_id), EVENTS.c.execution_id, ids)
            touched |= scalars(conn, select(ARTIFACTS.c.id), ARTIFACTS.c.producer, ids)
            # EXISTS stops at the first other use: a dataset every run reads is no scan.
            used = exists().where(
                EVENTS.c.artifact_id == ARTIFACTS.c.id,
                EXECUTIONS.c.id == EVENTS.c.execution_id,
                EXECUTIONS.c.run_id != run_id,
            )
            made = exists().where(
                EXECUTIONS.c.id == ARTIFACTS.c.producer, EXECUTIONS.c.run_id != run_id
            )
            # A registered model keeps its artifact: the registry (and a server) points at it.
            registered = exists().where(MODELS.c.uri == ARTIFACTS.c.uri)
            kept = select(ARTIFACTS.c.id).where(or_(used, made, registered))
            doomed = touched - scalars(conn, kept, ARTIFACTS.c.id, touched)
            uris = sorted(scalars(conn, select(ARTIFACTS.c.uri), ARTIFACTS.c.id, doomed))
            # Explicit, in dependency order, so it also holds where foreign keys are off.
            for chunk in chunks(ids):
                conn.execute(delete(EVENTS).where(EVENTS.c.execution_id.in_(chunk)))
                conn.execute(
                    update(EXECUTIONS)
                    .where(EXECUTIONS.c.cached_from.in_(chunk))
                    .values(cached_from=None)
                )
                conn.execute(
                    update(ARTIFACTS).where(ARTIFACTS.c.producer.in_(chunk)).values(producer=None)
                )
                conn.execute(
                    update(MODELS).where(MODELS.c.execution_id.in_(chunk)).values(execution_id=None)
                )
            for chunk in chunks(doomed):
                conn.execute(delete(EVENTS).where(EVENTS.c.artifact_id.in_(chunk)))
                conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.id.in_(chunk)))
            conn.execute(delete(METRICS).where(METRICS.c.run_id == run_id))
            conn.execute(update(MODELS).where(MODELS.c.run_id == run_id).values(run_id=None))
            conn.execute(update(ENDPOINTS).where(ENDPOINTS.c.run_id == run_id).values(run_id=None))
            conn.execute(delete(EXECUTIONS).where(EXECUTIONS.c.run_id == run_id))
            conn.execute(delete(RUNS).where(RUNS.c.run_id == run_id))
            return uris

        return self._db.transaction(write, write=True)

    def mark_interrupted(
        self,
        run_id: str,
        *,
        finished_at: float,
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None:
        """Mark a RUNNING run INTERRUPTED and its RUNNING executions FAILED (with an error
        record saying the engine stopped). A run that is no longer RUNNING is left alone, and
        so is one held by an engine other than `engine_host`/`engine_pid` when they are given
        (the condition is part of the UPDATE, so a claim made meanwhile is never undone).

        Raises:
            NotFoundError: No run has this id.
        """
        where = [RUNS.c.run_id == run_id, RUNS.c.state == "RUNNING"]
        if engine_host is not None:
            where.append(RUNS.c.engine_host == engine_host)
        if engine_pid is not None:
            where.append(RUNS.c.engine_pid == engine_pid)

        def write(conn: Connection) -> None:
            done = conn.execute(
                update(RUNS).where(*where).values(state="INTERRUPTED", finished_at=finished_at)
            )
            if done.rowcount == 0:
                if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
                    raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
                return
            conn.execute(
                update(EXECUTIONS)
                .where(EXECUTIONS.c.run_id == run_id, EXECUTIONS.c.state == "RUNNING")
                .values(state="FAILED", finished_at=finished_at, error=dict(_INTERRUPTED))
            )

        self._db.transaction(write, write=True)

    # -- executions, artifacts, events ----------------------------------------------------

    def record_execution(self, execution: ExecutionRecord) -> int:
        """Insert or update (by run id and task name) an execution; return its id.

        Raises:
            NotFoundError: The execution's run is not in the store.
        """
        values = {
            "component": execution.component,
            "parent_dag": execution.parent_dag,
            "iteration": execution.iteration,
            "state": execution.state,
            "inputs": execution.inputs,
            "outputs": execution.outputs,
            "cache_key": execution.cache_key,
            "cached_from": execution.cached_from,
            "started_at": execution.started_at,
            "finished_at": execution.finished_at,
            "log_path": execution.log_path,
            "error": execution.error,
            "attempts": execution.attempts,
            "executor": execution.executor,
            "worker": execution.worker,
        }

        def write(conn: Connection) -> int:
            key = {"run_id": execution.run_id, "task": execution.task}
            found = conn.execute(_EXECUTION_ID, key).scalar()
            if found is not None:
                conn.execute(_UPDATE_EXECUTION, {"execution_id": found, **values})
                return int(found)
            known = execution.run_id in self._runs_seen
            if (
                not known
                and conn.execute(_RUN_EXISTS, {"run_id": execution.run_id}).first() is None
            ):
                raise NotFoundError(
                    f"no run {execution.run_id!r} for execution {execution.task!r}: "
                    "create the run first"
                )
            self._runs_seen.add(execution.run_id)
            return int(conn.execute(_INSERT_EXECUTION, {**key, **values}).scalar_one())

        cached_from = f"execution {execution.cached_from} (cached_from)"
        return self._db.transaction(write, write=True, refers_to=cached_from)

    def list_executions(self, run_id: str) -> list[ExecutionRecord]:
        """A run's executions in start order (never started ones last, in record order)."""
        query = (
            select(EXECUTIONS)
            .where(EXECUTIONS.c.run_id == run_id)
            .order_by(EXECUTIONS.c.started_at.is_(None), EXECUTIONS.c.started_at, EXECUTIONS.c.id)
        )
        return self._db.transaction(lambda conn: [execution_record(r) for r in conn.execute(query)])

    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        """One execution by id, or None."""
        query = select(EXECUTIONS).where(EXECUTIONS.c.id == execution_id)
        row = self._db.transaction(lambda conn: conn.execute(query).first())
        return None if row is None else execution_record(row)

    def record_artifact(self, artifact: ArtifactRecord) -> int:
        """Insert an artifact, or update the one with the same URI; return its id.

        On update the schema title, name and metadata are replaced; digest (with its
        signature) and size only when given (not None); the producer only when none is
        recorded yet (a cache hit re-recording an artifact keeps its original producer);
        `created_at` never.
        """

        def write(conn: Connection) -> int:
            found = conn.execute(
                select(ARTIFACTS.c.id, ARTIFACTS.c.producer).where(ARTIFACTS.c.uri == artifact.uri)
            ).first()
            values: dict[str, Any] = {
                "schema_title": artifact.schema_title,
                "name": artifact.name,
                "metadata": artifact.metadata,
            }
            if artifact.digest is not None:
                # A signature belongs to the digest it was taken with: replaced together.
                values["digest"] = artifact.digest
                values["signature"] = artifact.signature
            if artifact.size is not None:
                values["size"] = artifact.size
            if found is not None:
                if found.producer is None and artifact.producer is not None:
                    values["producer"] = artifact.producer
                conn.execute(update(ARTIFACTS).where(ARTIFACTS.c.id == found.id).values(values))
                return int(found.id)
            stmt = (
                insert(ARTIFACTS)
                .values(
                    uri=artifact.uri,
                    producer=artifact.producer,
                    created_at=artifact.created_at or time.time(),
                    **values,
                )
                .returning(ARTIFACTS.c.id)
            )
            return int(conn.execute(stmt).scalar_one())

        return self._db.transaction(
            write, write=True, refers_to=f"producer execution {artifact.producer}"
        )

    def get_artifact(self, ref: int | str) -> ArtifactRecord | None:
        """An artifact by id (an int, a string of digits or "a:<id>") or by URI, or None."""
        key = artifact_key(ref)
        query, params = (
            (_ARTIFACT_BY_ID, {"id": key})
            if isinstance(key, int)
            else (_ARTIFACT_BY_URI, {"uri": key})
        )
        row = self._db.transaction(lambda conn: conn.execute(query, params).first())
        return None if row is None else artifact_record(row)

    def record_event(self, event: EventRecord) -> None:
        """Link an execution and an artifact; recording the same event again does nothing.

        Raises:
            InvalidArgumentError: `event.kind` is neither INPUT nor OUTPUT (a ValueError).
        """
        if event.kind not in ("INPUT", "OUTPUT"):
            raise InvalidArgumentError(f"event kind {event.kind!r}: expected 'INPUT' or 'OUTPUT'")
        key = {
            "execution_id": event.execution_id,
            "artifact_id": event.artifact_id,
            "kind": event.kind,
            "slot": event.slot,
            "index": event.index,
        }

        def write(conn: Connection) -> None:
            same = select(EVENTS.c.id).where(*(EVENTS.c[k] == v for k, v in key.items()))
            if conn.execute(same).first() is None:
                conn.execute(insert(EVENTS).values(key))

        missing = f"execution {event.execution_id} or artifact {event.artifact_id}"
        self._db.transaction(write, write=True, refers_to=missing)

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]:
        """Insert new executions in one statement; return their ids in order."""
        if not executions:
            return []
        rows = [
            {"run_id": e.run_id, "task": e.task, **{f: getattr(e, f) for f in _EXECUTION_FIELDS}}
            for e in executions
        ]
        unseen = {e.run_id for e in executions} - self._runs_seen

        def write(conn: Connection) -> list[int]:
            for run_id in unseen:
                if conn.execute(_RUN_EXISTS, {"run_id": run_id}).first() is None:
                    raise NotFoundError(f"no run {run_id!r} for these executions")
            stmt = insert(EXECUTIONS).returning(EXECUTIONS.c.id, sort_by_parameter_order=True)
            ids = [int(i) for i in conn.execute(stmt, rows).scalars()]
            self._runs_seen.update(unseen)
            return ids

        return self._db.transaction(write, write=True, refers_to="a cached_from execution")

    def record_events(self, events: list[EventRecord]) -> None:
        """Record several events in one statement; ones already recorded are skipped."""
        if not events:
            return
        for event in events:
            if event.kind not in ("INPUT", "OUTPUT"):
                raise InvalidArgumentError(
                    f"event kind {event.kind!r}: expected 'INPUT' or 'OUTPUT'"
                )
        rows = [
            {
                "execution_id": e.execution_id,
                "artifact_id": e.artifact_id,
                "kind": e.kind,
                "slot": e.slot,
                "index": e.index,
            }
            for e in events
        ]
        dialect = self._db.engine.dialect.name
        stmt: Any
        if dialect == "sqlite":
            from sqlalchemy.dialects import sqlite

            stmt = sqlite.insert(EVENTS).values(rows).on_conflict_do_nothing()
        elif dialect == "postgresql":
            from sqlalchemy.dialects import postgresql

            stmt = postgresql.insert(EVENTS).values(rows).on_conflict_do_nothing()
        else:
            super().record_events(events)
            return
        missing = "an execution or artifact of these events"
        self._db.transaction(lambda conn: conn.execute(stmt), write=True, refers_to=missing)

    def _artifacts_of(
        self, conn: Connection, execution_id: int
    ) -> list[tuple[EventRecord, ArtifactRecord]]:
        out = []
        for row in conn.execute(_ARTIFACTS_OF, {"execution_id": execution_id}):
            kind = cast(Literal["INPUT", "OUTPUT"], row.kind)
            ev = EventRecord(execution_id, row.id, kind, row.slot, row.event_index)
            out.append((ev, artifact_record(row)))
        return out

    def artifacts_of_many(
        self, execution_ids: list[int]
    ) -> dict[int, list[tuple[EventRecord, ArtifactRecord]]]:
        """The events and artifacts of several executions, one query per 500 ids."""
        found: dict[int, list[tuple[EventRecord, ArtifactRecord]]] = {i: [] for i in execution_ids}

        def read(conn: Connection) -> None:
            for batch in chunks(list(execution_ids)):
                query = (
                    select(
                        EVENTS.c.execution_id.label("event_execution"),
                        EVENTS.c.kind,
                        EVENTS.c.slot,
                        EVENTS.c.index.label("event_index"),
                        ARTIFACTS,
                    )
                    .join(ARTIFACTS, ARTIFACTS.c.id == EVENTS.c.artifact_id)
                    .where(EVENTS.c.execution_id.in_(batch))
                    .order_by(EVENTS.c.kind, EVENTS.c.slot, EVENTS.c.index, EVENTS.c.id)
                )
                for row in conn.execute(query):
                    kind = cast(Literal["INPUT", "OUTPUT"], row.kind)
                    ev = EventRecord(row.event_execution, row.id, kind, row.slot, row.event_index)
                    found[row.event_execution].append((ev, artifact_record(row)))

        self._db.transaction(read)
        return found

    def artifacts_of(self, execution_id: int) -> list[tuple[EventRecord, ArtifactRecord]]:
        """The artifacts an execution consumed and produced: inputs first, by slot and index."""
        return self._db.transaction(lambda conn: self._artifacts_of(conn, execution_id))

    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None:
        """Store scalar metrics, replacing values this execution and artifact logged before.

        Raises:
            InvalidArgumentError: A value is not a number (a ValueError).
        """
        try:
            values = {name: float(value) for name, value in metrics.items()}
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"metrics of run {run_id!r} must be numbers, got {metrics!r}"
            ) from exc
        rows = [
            {
                "run_id": run_id,
                "execution_id": execution_id,
                "artifact_id": artifact_id,
                "name": name,
                "value": None if math.isnan(value) else value,
            }
            for name, value in values.items()
        ]
        if not rows:
            return

        def write(conn: Connection) -> None:
            conn.execute(
                delete(METRICS).where(
                    METRICS.c.run_id == run_id,
                    METRICS.c.execution_id == execution_id,
                    METRICS.c.artifact_id == artifact_id,
                    METRICS.c.name.in_(list(values)),
                )
            )
            conn.execute(insert(METRICS), rows)

        self._db.transaction(write, write=True, refers_to=f"run {run_id!r}")

    # -- caching and lineage ------------------------------------------------------------

    def find_cached(self, cache_key: str) -> ExecutionRecord | None:
        """The newest SUCCEEDED execution with this cache key (never a CACHED or FAILED one)."""
        if not cache_key:
            return None
        params = {"cache_key": cache_key}
        row = self._db.transaction(lambda conn: conn.execute(_CACHED, params).first())
        return None if row is None else execution_record(row)

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
        """`find_cached` and its `artifacts_of` in one read transaction."""
        if not cache_key:
            return None

        def read(
            conn: Connection,
        ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
            row = conn.execute(_CACHED, {"cache_key": cache_key}).first()
            if row is None:
                return None
            return execution_record(row), self._artifacts_of(conn, row.id)

        return self._db.transaction(read)

    def clear_cache(self) -> int:
        """Forget every cache key (executions stay); return how many were cleared."""
        stmt = update(EXECUTIONS).where(EXECUTIONS.c.cache_key != "").values(cache_key="")
        return self._db.transaction(lambda conn: int(conn.execute(stmt).rowcount), write=True)

    def lineage(
        self, ref: int | str, *, direction: Direction = "both", depth: int = 10
    ) -> LineageGraph:
        """The graph around an artifact or execution, up to `depth` layers of executions.

        `ref` is an artifact id (int, digits or "a:<id>"), an artifact URI, or "e:<id>" for an
        execution. Upstream of an artifact are the executions with an OUTPUT event to it, then
        their INPUT artifacts, their producers, ...; downstream the executions with an INPUT
        event from it, their OUTPUT artifacts, ...; "both" joins the two walks (ancestors and
        descendants, not the ancestors' other descendants). `depth` counts the layers of
        executions in each direction: from an artifact, depth 1 reaches its producers and
        their inputs; from an execution, depth 1 is that execution and its own artifacts.
        Each execution's run is added as an "r:<run_id>" node with a RUN edge.

        Raises:
            NotFoundError: No artifact or execution matches `ref`.
            InvalidArgumentError: `direction` is not upstream, downstream or both.
        """
        if direction not in ("upstream", "downstream", "both"):
            raise InvalidArgumentError(
                f"direction {direction!r}: expected upstream, downstream or both"
            )
        return self._db.transaction(
            lambda conn: lineage_graph(conn, ref, direction, depth, self.url)
        )

    # -- model registry -------------------------------------------------------------------

    def register_model(self, model: ModelRecord) -> tuple[ModelRecord, bool]:
        """Register the next version of `model.name` (see `MetadataStore.register_model`).

        Raises:
            NotFoundError: Its run or execution is not in the store.
            InvalidArgumentError: An empty name or URI, or a stage that does not exist.
        """
        if not model.name or not model.uri:
            raise InvalidArgumentError(
                f"a model needs a name and a URI, got name={model.name!r} uri={model.uri!r}"
            )
        model_stage(model.stage)
        named = [f"run {model.run_id!r}"] if model.run_id is not None else []
        named += [f"execution {model.execution_id}"] if model.execution_id is not None else []
        refers = " or ".join(named)  # "": a unique key still taken is our fault, not the user's
        return self._db.transaction(
            lambda conn: models.register(conn, model), write=True, refers_to=refers
        )

    def list_models(self, *, name: str | None = None) -> list[ModelRecord]:
        """Registered models by name, newest version first; only `name`'s if given."""
        where = [] if name is None else [MODELS.c.name == name]
        return self._db.transaction(lambda conn: models.select_models(conn, *where))

    def get_model(self, name: str, version: int | None = None) -> ModelRecord | None:
        """One version of a model, the newest if `version` is None; None if not registered."""
        where = [MODELS.c.name == name]
        if version is not None:
            where.append(MODELS.c.version == version)

        def read(conn: Connection) -> ModelRecord | None:
            found = models.select_models(conn, *where)
            return found[0] if found else None

        return self._db.transaction(read)

    def promote_model(
        self, name: str, version: int, stage: str
    ) -> tuple[ModelRecord, list[ModelRecord]]:
        """Move a version to `stage`, demoting the production version when promoting to
        production, in one transaction (see `MetadataStore.promote_model`).

        Raises:
            NotFoundError: No such name or version (the message lists what is registered).
            InvalidArgumentError: The stage does not exist.
        """
        model_stage(stage)
        return self._db.transaction(
            lambda conn: models.promote(conn, name, version, stage, self.url), write=True
        )

    # -- endpoints ------------------------------------------------------------------------

    def save_endpoint(self, endpoint: EndpointRecord) -> EndpointRecord:
        """Record `endpoint` under its name, replacing (and keeping the `created_at` of) the
        record there (see `MetadataStore.save_endpoint`).

        Raises:
            NotFoundError: Its run is not in the store.
        """
        if not endpoint.name:
            raise InvalidArgumentError("an endpoint needs a name")

        def write(conn: Connection) -> EndpointRecord:
            now = time.time()
            before = conn.execute(
                select(ENDPOINTS.c.created_at).where(ENDPOINTS.c.name == endpoint.name)
            ).scalar_one_or_none()
            values = {
                "url": endpoint.url,
                "host": endpoint.host,
                "pid": endpoint.pid,
                "started": endpoint.started,
                "models": endpoint.models,
                "config": endpoint.config,
                "state": endpoint.state,
                "log_path": endpoint.log_path,
                "run_id": endpoint.run_id,
                "task": endpoint.task,
                "updated_at": now,
            }
            if before is None:
                created = endpoint.created_at or now
                conn.execute(
                    insert(ENDPOINTS).values(name=endpoint.name, created_at=created, **values)
                )
            else:
                conn.execute(
                    update(ENDPOINTS).where(ENDPOINTS.c.name == endpoint.name).values(**values)
                )
            return _select_endpoints(conn, ENDPOINTS.c.name == endpoint.name)[0]

        refers = f"run {endpoint.run_id!r}" if endpoint.run_id is not None else ""
        return self._db.transaction(write, write=True, refers_to=refers)

    def list_endpoints(self) -> list[EndpointRecord]:
        """Every recorded endpoint, by name."""
        return self._db.transaction(lambda conn: _select_endpoints(conn))

    def get_endpoint(self, name: str) -> EndpointRecord | None:
        """The endpoint recorded under `name`, or None."""
        found = self._db.transaction(lambda conn: _select_endpoints(conn, ENDPOINTS.c.name == name))
        return found[0] if found else None

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """This thread's writes inside the block share one transaction (one commit)."""
        return self._db.batch()

    def close(self) -> None:
        """Release connections. A file or server store reconnects if used again; an
        in-memory one is gone."""
        self._db.dispose()


def _select_endpoints(conn: Connection, *where: Any) -> list[EndpointRecord]:
    query = select(ENDPOINTS).where(*where).order_by(ENDPOINTS.c.name)
    return [
        EndpointRecord(
            name=r.name,
            url=r.url,
            host=r.host,
            pid=r.pid,
            started=r.started,
            models=list(r.models or []),
            config=dict(r.config or {}),
            state=r.state,
            log_path=r.log_path,
            run_id=r.run_id,
            task=r.task,
            created_at=r.created_at,
            updated_at=r.updated_at,
        )
        for r in conn.execute(query)
    ]


# Statements on the engine's path (a cache lookup per task), built once: building a select
# costs more than running it on SQLite.
_CACHED = (
    select(EXECUTIONS)
    .where(EXECUTIONS.c.cache_key == bindparam("cache_key"), EXECUTIONS.c.state == "SUCCEEDED")
    .order_by(
        EXECUTIONS.c.finished_at.is_(None),
        EXECUTIONS.c.finished_at.desc(),
        EXECUTIONS.c.id.desc(),
    )
    .limit(1)
)
_ARTIFACTS_OF = (
    select(EVENTS.c.kind, EVENTS.c.slot, EVENTS.c.index.label("event_index"), ARTIFACTS)
    .join(ARTIFACTS, ARTIFACTS.c.id == EVENTS.c.artifact_id)
    .where(EVENTS.c.execution_id == bindparam("execution_id"))
    .order_by(EVENTS.c.kind, EVENTS.c.slot, EVENTS.c.index, EVENTS.c.id)
)
_EXECUTION_ID = select(EXECUTIONS.c.id).where(
    EXECUTIONS.c.run_id == bindparam("run_id"), EXECUTIONS.c.task == bindparam("task")
)
#: Run states a resume may claim.
_CLAIMABLE = ("FAILED", "INTERRUPTED")
_RUN_EXISTS = select(RUNS.c.run_id).where(RUNS.c.run_id == bindparam("run_id"))
_EXECUTION_FIELDS = (
    "component", "parent_dag", "iteration", "state", "inputs", "outputs", "cache_key",
    "cached_from", "started_at", "finished_at", "log_path", "error", "attempts", "executor",
    "worker",
)  # fmt: skip
_UPDATE_EXECUTION = (
    update(EXECUTIONS)
    .where(EXECUTIONS.c.id == bindparam("execution_id"))
    .values({name: bindparam(name) for name in _EXECUTION_FIELDS})
)
_INSERT_EXECUTION = (
    insert(EXECUTIONS)
    .values({name: bindparam(name) for name in ("run_id", "task", *_EXECUTION_FIELDS)})
    .returning(EXECUTIONS.c.id)
)
_ARTIFACT_BY_URI = select(ARTIFACTS).where(ARTIFACTS.c.uri == bindparam("uri"))
_ARTIFACT_BY_ID = select(ARTIFACTS).where(ARTIFACTS.c.id == bindparam("id"))
