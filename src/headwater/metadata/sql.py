"""`SqlMetadataStore`: the metadata store on SQLite (the default) or PostgreSQL, via SQLAlchemy.

Opening a store migrates its database to the newest schema (see `migrations`). SQLite runs in
WAL mode with a 30 s busy timeout; write transactions start with `BEGIN IMMEDIATE`, so
concurrent writers queue instead of failing, and are retried a few times if the database is
still locked. Queries are Core statements over the tables in `schema`; lineage walks the
events table one breadth-first level per query.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import (
    URL,
    ColumnElement,
    Connection,
    Engine,
    Row,
    RowMapping,
    Select,
    Table,
    create_engine,
    delete,
    event,
    exists,
    insert,
    make_url,
    or_,
    select,
    update,
)
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.pool import StaticPool

from headwater.errors import NotFoundError, StorageError, UserError
from headwater.metadata import migrations, schema
from headwater.metadata.base import (
    ArtifactRecord,
    Direction,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    MetadataStore,
    RunRecord,
)

T = TypeVar("T")

PIPELINES = cast(Table, schema.Pipeline.__table__)
RUNS = cast(Table, schema.Run.__table__)
EXECUTIONS = cast(Table, schema.Execution.__table__)
ARTIFACTS = cast(Table, schema.Artifact.__table__)
EVENTS = cast(Table, schema.Event.__table__)
METRICS = cast(Table, schema.Metric.__table__)

#: Attempts for a write that finds the SQLite database locked past its busy timeout.
WRITE_ATTEMPTS = 4
_BUSY_TIMEOUT_MS = 30_000
_CHUNK = 500  # ids per `IN (...)`, well under SQLite's bound-parameter limit
_INTERRUPTED = {
    "error_type": "Interrupted",
    "message": "the engine stopped before the task finished",
}
_URL_HELP = (
    "use 'sqlite:////absolute/path/metadata.db' or "
    "'postgresql+psycopg://user:password@host:5432/database' (set HEADWATER_METADATA_URL)"
)


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

    def __init__(self, url: str) -> None:
        self.url = mask_url(url)
        self._engine, sqlite_path = _make_engine(url, self.url)
        self._writer = self._engine.execution_options(headwater_write=True)
        # One shared in-memory connection must not be used by two threads at once.
        self._serial: threading.RLock | None = None
        if isinstance(self._engine.pool, StaticPool):
            self._serial = threading.RLock()
        lock = None if sqlite_path is None else sqlite_path.with_name(sqlite_path.name + ".lock")
        try:
            migrations.upgrade(self._writer, lock_path=lock)
        except Exception as exc:
            self._engine.dispose()
            raise _open_error(self.url, exc) from exc

    def __enter__(self) -> SqlMetadataStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqlMetadataStore({self.url!r})"

    # -- transactions ---------------------------------------------------------------------

    def _tx(self, fn: Callable[[Connection], T], *, write: bool = False, refers_to: str = "") -> T:
        """Run `fn` in one transaction; retry writes that find the database locked or that
        lost an insert race (a unique key taken meanwhile by another process). A constraint
        still violated after that is a reference to a missing record: `refers_to` names it."""
        engine = self._writer if write else self._engine
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._serial or contextlib.nullcontext(), engine.begin() as conn:
                    return fn(conn)
            except OperationalError as exc:
                if write and _is_locked(exc) and attempt < WRITE_ATTEMPTS:
                    time.sleep(0.05 * 4**attempt)
                    continue
                raise StorageError(
                    f"metadata store {self.url!r} failed: {_first_line(exc)}: "
                    "check that the database is reachable and not locked by another program"
                ) from exc
            except IntegrityError as exc:
                if write and attempt < 2:
                    continue
                if not refers_to:
                    raise
                raise NotFoundError(
                    f"{refers_to} is not in the metadata store {self.url!r} "
                    f"({_first_line(exc)}): record it first"
                ) from exc

    # -- runs -----------------------------------------------------------------------------

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """Record a new run and its pipeline version (found or added by name and digest).

        An empty `run.pipeline_version` is replaced by the SHA-256 of the canonical IR.

        Raises:
            UserError: A run with this id exists already (resume it with `reopen_run`).
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

        self._tx(write, write=True)

    def reopen_run(self, run_id: str, *, engine_host: str, engine_pid: int) -> None:
        """Mark a finished run RUNNING again under a new engine (to resume it).

        Raises:
            NotFoundError: No run has this id.
        """
        self._update_run(
            run_id,
            state="RUNNING",
            finished_at=None,
            error=None,
            engine_host=engine_host,
            engine_pid=engine_pid,
        )

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

        self._tx(write, write=True)

    def get_run(self, run_id: str) -> RunRecord | None:
        """One run with its metrics, or None; a unique prefix of the id also matches.

        Raises:
            NotFoundError: The prefix matches several runs (the message lists some).
        """

        def read(conn: Connection) -> RunRecord | None:
            full = _resolve_run_id(conn, run_id)
            if full is None:
                return None
            runs = _select_runs(conn, RUNS.c.run_id == full)
            return runs[0] if runs else None

        return self._tx(read)

    def get_pipeline_ir(self, run_id: str) -> dict[str, Any] | None:
        """The IR the run executed, or None for an unknown run (a unique prefix matches)."""

        def read(conn: Connection) -> dict[str, Any] | None:
            full = _resolve_run_id(conn, run_id)
            if full is None:
                return None
            query = (
                select(PIPELINES.c.ir)
                .join(RUNS, RUNS.c.pipeline_id == PIPELINES.c.id)
                .where(RUNS.c.run_id == full)
            )
            ir = conn.execute(query).scalar()
            return dict(ir) if ir is not None else None

        return self._tx(read)

    def list_runs(
        self, *, pipeline: str | None = None, state: str | None = None, limit: int | None = None
    ) -> list[RunRecord]:
        """Runs, newest first, with their metrics; filtered by pipeline name and state."""
        where = []
        if pipeline is not None:
            where.append(PIPELINES.c.name == pipeline)
        if state is not None:
            where.append(RUNS.c.state == state)
        return self._tx(lambda conn: _select_runs(conn, *where, limit=limit))

    def running_runs(self) -> list[RunRecord]:
        """Runs still marked RUNNING, newest first."""
        return self._tx(lambda conn: _select_runs(conn, RUNS.c.state == "RUNNING"))

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

        def write(conn: Connection) -> list[str]:
            if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first() is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            here = select(EXECUTIONS.c.id).where(EXECUTIONS.c.run_id == run_id)
            ids = list(conn.execute(here).scalars())
            touched = _scalars(conn, select(EVENTS.c.artifact_id), EVENTS.c.execution_id, ids)
            touched |= _scalars(conn, select(ARTIFACTS.c.id), ARTIFACTS.c.producer, ids)
            # EXISTS stops at the first other use: a dataset every run reads is no scan.
            used = exists().where(
                EVENTS.c.artifact_id == ARTIFACTS.c.id,
                EXECUTIONS.c.id == EVENTS.c.execution_id,
                EXECUTIONS.c.run_id != run_id,
            )
            made = exists().where(
                EXECUTIONS.c.id == ARTIFACTS.c.producer, EXECUTIONS.c.run_id != run_id
            )
            kept = select(ARTIFACTS.c.id).where(or_(used, made))
            doomed = touched - _scalars(conn, kept, ARTIFACTS.c.id, touched)
            uris = sorted(_scalars(conn, select(ARTIFACTS.c.uri), ARTIFACTS.c.id, doomed))
            # Explicit, in dependency order, so it also holds where foreign keys are off.
            for chunk in _chunks(ids):
                conn.execute(delete(EVENTS).where(EVENTS.c.execution_id.in_(chunk)))
                conn.execute(
                    update(EXECUTIONS)
                    .where(EXECUTIONS.c.cached_from.in_(chunk))
                    .values(cached_from=None)
                )
                conn.execute(
                    update(ARTIFACTS).where(ARTIFACTS.c.producer.in_(chunk)).values(producer=None)
                )
            for chunk in _chunks(doomed):
                conn.execute(delete(EVENTS).where(EVENTS.c.artifact_id.in_(chunk)))
                conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.id.in_(chunk)))
            conn.execute(delete(METRICS).where(METRICS.c.run_id == run_id))
            conn.execute(delete(EXECUTIONS).where(EXECUTIONS.c.run_id == run_id))
            conn.execute(delete(RUNS).where(RUNS.c.run_id == run_id))
            return uris

        return self._tx(write, write=True)

    def mark_interrupted(self, run_id: str, *, finished_at: float) -> None:
        """Mark a RUNNING run INTERRUPTED and its RUNNING executions FAILED (with an error
        record saying the engine stopped). A run that is no longer RUNNING is left alone.

        Raises:
            NotFoundError: No run has this id.
        """

        def write(conn: Connection) -> None:
            state = conn.execute(select(RUNS.c.state).where(RUNS.c.run_id == run_id)).scalar()
            if state is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")
            if state != "RUNNING":
                return
            conn.execute(
                update(RUNS)
                .where(RUNS.c.run_id == run_id)
                .values(state="INTERRUPTED", finished_at=finished_at)
            )
            conn.execute(
                update(EXECUTIONS)
                .where(EXECUTIONS.c.run_id == run_id, EXECUTIONS.c.state == "RUNNING")
                .values(state="FAILED", finished_at=finished_at, error=dict(_INTERRUPTED))
            )

        self._tx(write, write=True)

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
        }

        def write(conn: Connection) -> int:
            found = conn.execute(
                select(EXECUTIONS.c.id).where(
                    EXECUTIONS.c.run_id == execution.run_id, EXECUTIONS.c.task == execution.task
                )
            ).scalar()
            if found is not None:
                conn.execute(update(EXECUTIONS).where(EXECUTIONS.c.id == found).values(values))
                return int(found)
            run = select(RUNS.c.run_id).where(RUNS.c.run_id == execution.run_id)
            if conn.execute(run).first() is None:
                raise NotFoundError(
                    f"no run {execution.run_id!r} for execution {execution.task!r}: "
                    "create the run first"
                )
            stmt = (
                insert(EXECUTIONS)
                .values(run_id=execution.run_id, task=execution.task, **values)
                .returning(EXECUTIONS.c.id)
            )
            return int(conn.execute(stmt).scalar_one())

        cached_from = f"execution {execution.cached_from} (cached_from)"
        return self._tx(write, write=True, refers_to=cached_from)

    def list_executions(self, run_id: str) -> list[ExecutionRecord]:
        """A run's executions in start order (never started ones last, in record order)."""
        query = (
            select(EXECUTIONS)
            .where(EXECUTIONS.c.run_id == run_id)
            .order_by(EXECUTIONS.c.started_at.is_(None), EXECUTIONS.c.started_at, EXECUTIONS.c.id)
        )
        return self._tx(lambda conn: [_execution(r) for r in conn.execute(query)])

    def get_execution(self, execution_id: int) -> ExecutionRecord | None:
        """One execution by id, or None."""
        query = select(EXECUTIONS).where(EXECUTIONS.c.id == execution_id)
        row = self._tx(lambda conn: conn.execute(query).first())
        return None if row is None else _execution(row)

    def record_artifact(self, artifact: ArtifactRecord) -> int:
        """Insert an artifact, or update the one with the same URI; return its id.

        On update the schema title, name and metadata are replaced; digest and size only
        when given (not None); the producer only when none is recorded yet (a cache hit
        re-recording an artifact keeps its original producer); `created_at` never.
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
                values["digest"] = artifact.digest
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

        return self._tx(write, write=True, refers_to=f"producer execution {artifact.producer}")

    def get_artifact(self, ref: int | str) -> ArtifactRecord | None:
        """An artifact by id (an int, a string of digits or "a:<id>") or by URI, or None."""
        key = _artifact_key(ref)
        column = ARTIFACTS.c.id if isinstance(key, int) else ARTIFACTS.c.uri
        row = self._tx(lambda conn: conn.execute(select(ARTIFACTS).where(column == key)).first())
        return None if row is None else _artifact(row)

    def record_event(self, event: EventRecord) -> None:
        """Link an execution and an artifact; recording the same event again does nothing.

        Raises:
            ValueError: `event.kind` is neither INPUT nor OUTPUT.
        """
        if event.kind not in ("INPUT", "OUTPUT"):
            raise ValueError(f"event kind {event.kind!r}: expected 'INPUT' or 'OUTPUT'")
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
        self._tx(write, write=True, refers_to=missing)

    def artifacts_of(self, execution_id: int) -> list[tuple[EventRecord, ArtifactRecord]]:
        """The artifacts an execution consumed and produced: inputs first, by slot and index."""
        query = (
            select(EVENTS.c.kind, EVENTS.c.slot, EVENTS.c.index.label("event_index"), ARTIFACTS)
            .join(ARTIFACTS, ARTIFACTS.c.id == EVENTS.c.artifact_id)
            .where(EVENTS.c.execution_id == execution_id)
            .order_by(EVENTS.c.kind, EVENTS.c.slot, EVENTS.c.index, EVENTS.c.id)
        )

        def read(conn: Connection) -> list[tuple[EventRecord, ArtifactRecord]]:
            out = []
            for row in conn.execute(query):
                kind = cast(Literal["INPUT", "OUTPUT"], row.kind)
                ev = EventRecord(execution_id, row.id, kind, row.slot, row.event_index)
                out.append((ev, _artifact(row)))
            return out

        return self._tx(read)

    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None:
        """Store scalar metrics, replacing values this execution and artifact logged before.

        Raises:
            ValueError: A value is not a number.
        """
        values = {name: float(value) for name, value in metrics.items()}
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

        self._tx(write, write=True, refers_to=f"run {run_id!r}")

    # -- caching and lineage ------------------------------------------------------------

    def find_cached(self, cache_key: str) -> ExecutionRecord | None:
        """The newest SUCCEEDED execution with this cache key (never a CACHED or FAILED one)."""
        if not cache_key:
            return None
        query = (
            select(EXECUTIONS)
            .where(EXECUTIONS.c.cache_key == cache_key, EXECUTIONS.c.state == "SUCCEEDED")
            .order_by(
                EXECUTIONS.c.finished_at.is_(None),
                EXECUTIONS.c.finished_at.desc(),
                EXECUTIONS.c.id.desc(),
            )
            .limit(1)
        )
        row = self._tx(lambda conn: conn.execute(query).first())
        return None if row is None else _execution(row)

    def clear_cache(self) -> int:
        """Forget every cache key (executions stay); return how many were cleared."""
        stmt = update(EXECUTIONS).where(EXECUTIONS.c.cache_key != "").values(cache_key="")
        return self._tx(lambda conn: int(conn.execute(stmt).rowcount), write=True)

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
            ValueError: `direction` is not upstream, downstream or both.
        """
        if direction not in ("upstream", "downstream", "both"):
            raise ValueError(f"direction {direction!r}: expected upstream, downstream or both")
        return self._tx(lambda conn: _lineage(conn, ref, direction, depth, self.url))

    def close(self) -> None:
        """Release connections. A file or server store reconnects if used again; an
        in-memory one is gone."""
        self._engine.dispose()


# -- opening ----------------------------------------------------------------------------


def mask_url(url: str) -> str:
    """`url` with any password replaced by ***, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(//[^/:@]*:)[^/@]*@", r"\1***@", url)


def ir_digest(ir: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of an IR document (the pipeline version)."""
    text = json.dumps(ir, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _make_engine(url: str, masked: str) -> tuple[Engine, Path | None]:
    """An engine for `url` and, for a SQLite file, its path (None otherwise)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StorageError(
            f"metadata store URL {masked!r} is not a SQLAlchemy URL: {_URL_HELP}"
        ) from exc
    parsed = _with_driver(parsed)
    kwargs: dict[str, Any] = {"json_serializer": _json_dumps}
    sqlite_path = _sqlite_path(parsed)
    if sqlite_path is not None:
        if not sqlite_path.parent.is_dir():
            raise StorageError(
                f"metadata store URL {masked!r}: directory {str(sqlite_path.parent)!r} "
                "does not exist: create it, or point the URL at an existing directory"
            )
        parsed = parsed.set(database=str(sqlite_path))
    in_memory = _sqlite_in_memory(parsed)
    if in_memory:
        kwargs["poolclass"] = StaticPool
        kwargs["connect_args"] = {"check_same_thread": False}
    elif parsed.get_backend_name() == "postgresql":
        kwargs["pool_pre_ping"] = True
        if parsed.get_driver_name() == "psycopg" and "connect_timeout" not in parsed.query:
            kwargs["connect_args"] = {"connect_timeout": 10}
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError as exc:
        raise StorageError(
            f"metadata store URL {masked!r}: unknown database "
            f"{parsed.drivername!r} (known: sqlite, postgresql): {_URL_HELP}"
        ) from exc
    except ImportError as exc:
        extra = (
            "pip install 'headwater[postgres]'"
            if parsed.get_backend_name() == "postgresql"
            else "install it, or use SQLite or PostgreSQL"
        )
        raise StorageError(
            f"metadata store URL {masked!r} needs the database driver {exc.name!r}, "
            f"which is not installed: {extra}"
        ) from exc
    except (ArgumentError, TypeError, ValueError) as exc:
        raise StorageError(
            f"metadata store URL {masked!r}: {_first_line(exc)}: {_URL_HELP}"
        ) from exc
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine, in_memory=in_memory)
    return engine, sqlite_path


def sqlite_file(url: str) -> Path | None:
    """The database file a `sqlite:///...` URL names; None for other or in-memory URLs."""
    try:
        return _sqlite_path(make_url(url))
    except (ArgumentError, ValueError):
        return None


def _sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or _sqlite_in_memory(url):
        return None
    database = url.database or ""
    if database.startswith("file:"):  # an SQLite URI filename (uri=true): used as given
        return None
    return Path(database).expanduser().absolute()


def _sqlite_in_memory(url: URL) -> bool:
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and (
        database in ("", ":memory:") or url.query.get("mode") == "memory"
    )


def _with_driver(url: URL) -> URL:
    """`postgres://`/`postgresql://` use psycopg 3 (our `postgres` extra) unless psycopg2 is
    installed, which is SQLAlchemy's default driver."""
    import importlib.util

    if url.drivername in ("postgres", "postgresql"):
        has_psycopg2 = importlib.util.find_spec("psycopg2") is not None
        has_psycopg = importlib.util.find_spec("psycopg") is not None
        driver = "postgresql+psycopg" if has_psycopg and not has_psycopg2 else "postgresql"
        return url.set(drivername=driver)
    return url


def _configure_sqlite(engine: Engine, *, in_memory: bool) -> None:
    """Pragmas on every connection; we issue BEGIN ourselves (IMMEDIATE for writes)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Autocommit at the driver level: pysqlite's own implicit BEGIN would be DEFERRED,
        # and a deferred transaction that later writes can fail at once with "locked".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if not in_memory:
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("headwater_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _open_error(masked: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, SQLAlchemyError):
        fix = (
            "check that the path is a writable SQLite database file"
            if masked.startswith("sqlite")
            else "check that the server is running and the host, port, database, user and "
            "password are right"
        )
        return StorageError(f"cannot open metadata store {masked!r}: {_first_line(exc)}: {fix}")
    from alembic.util import CommandError

    if isinstance(exc, CommandError):  # a revision we do not know
        return StorageError(
            f"metadata store {masked!r} has a schema newer than this Headwater knows "
            f"({_first_line(exc)}; newest known {migrations.HEAD!r}): upgrade headwater, "
            "or use another metadata URL"
        )
    return StorageError(f"cannot open metadata store {masked!r}: {_first_line(exc)}")


def _json_dumps(value: Any) -> str:
    """JSON for a column: non-finite floats as strings (PostgreSQL's json rejects NaN) and
    anything else json cannot encode as its str()."""
    try:
        return json.dumps(value, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(value), allow_nan=False, default=str)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc
    lines = str(inner).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(inner).__name__


def _is_locked(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return "database is locked" in text or "database is busy" in text


# -- queries ----------------------------------------------------------------------------


def _chunks(ids: Iterable[T], size: int = _CHUNK) -> Iterator[list[T]]:
    batch: list[T] = []
    for item in ids:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _scalars(
    conn: Connection, query: Select[Any], key: ColumnElement[Any], ids: Iterable[Any]
) -> set[Any]:
    """The first column of `query` over rows whose `key` is in `ids`, batched."""
    found: set[Any] = set()
    for chunk in _chunks(sorted(ids)):
        found.update(conn.execute(query.where(key.in_(chunk))).scalars())
    return found


def _resolve_run_id(conn: Connection, run_id: str) -> str | None:
    """The full id of the run `run_id` names exactly or as a unique prefix."""
    if not run_id:
        return None
    if conn.execute(select(RUNS.c.run_id).where(RUNS.c.run_id == run_id)).first():
        return run_id
    candidates = conn.execute(
        select(RUNS.c.run_id).where(RUNS.c.run_id.startswith(run_id, autoescape=True))
    ).scalars()
    # SQLite's LIKE ignores case; ids are compared exactly here.
    matches = sorted(c for c in candidates if c.startswith(run_id))
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise NotFoundError(
            f"run id prefix {run_id!r} is ambiguous: it matches {len(matches)} runs "
            f"({shown}); give more characters"
        )
    return matches[0] if matches else None


def _select_runs(conn: Connection, *where: Any, limit: int | None = None) -> list[RunRecord]:
    query = (
        select(RUNS, PIPELINES.c.name.label("pipeline"), PIPELINES.c.version)
        .join(PIPELINES, PIPELINES.c.id == RUNS.c.pipeline_id)
        .where(*where)
        .order_by(RUNS.c.created_at.desc(), RUNS.c.run_id.desc())
    )
    if limit is not None:
        query = query.limit(limit)
    runs = [
        RunRecord(
            run_id=r.run_id,
            pipeline=r.pipeline,
            pipeline_version=r.version,
            state=r.state,
            parameters=dict(r.parameters or {}),
            pipeline_root=r.pipeline_root,
            created_at=r.created_at,
            finished_at=r.finished_at,
            outputs=dict(r.outputs or {}),
            error=r.error,
            engine_host=r.engine_host,
            engine_pid=r.engine_pid,
        )
        for r in conn.execute(query)
    ]
    by_id = {run.run_id: run for run in runs}
    for chunk in _chunks(by_id):
        rows = conn.execute(
            select(METRICS.c.run_id, METRICS.c.name, METRICS.c.value)
            .where(METRICS.c.run_id.in_(chunk))
            .order_by(METRICS.c.id)
        )
        for m in rows:  # a later execution logging the same name wins
            by_id[m.run_id].metrics[m.name] = math.nan if m.value is None else m.value
    return runs


def _execution(row: Row[Any]) -> ExecutionRecord:
    return ExecutionRecord(
        id=row.id,
        run_id=row.run_id,
        task=row.task,
        state=row.state,
        component=row.component,
        parent_dag=row.parent_dag,
        iteration=row.iteration,
        inputs=dict(row.inputs or {}),
        outputs=dict(row.outputs or {}),
        cache_key=row.cache_key,
        cached_from=row.cached_from,
        started_at=row.started_at,
        finished_at=row.finished_at,
        log_path=row.log_path,
        error=row.error,
        attempts=row.attempts,
    )


def _artifact(row: Row[Any]) -> ArtifactRecord:
    return ArtifactRecord(
        id=row.id,
        uri=row.uri,
        schema_title=row.schema_title,
        name=row.name,
        digest=row.digest,
        size=row.size,
        metadata=dict(row.metadata or {}),
        producer=row.producer,
        created_at=row.created_at,
    )


def _artifact_key(ref: int | str) -> int | str:
    """An artifact reference as an id (int) or a URI (str)."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    text = str(ref).strip()
    if text.isdigit():
        return int(text)
    if text.startswith("a:") and text[2:].isdigit():
        return int(text[2:])
    return text


def _lineage(
    conn: Connection, ref: int | str, direction: Direction, depth: int, masked: str
) -> LineageGraph:
    text = str(ref).strip() if not isinstance(ref, int) else ""
    if text.startswith("e:") and text[2:].isdigit():
        start: tuple[str, int] = ("e", int(text[2:]))
        found = conn.execute(select(EXECUTIONS.c.id).where(EXECUTIONS.c.id == start[1])).first()
    else:
        key = _artifact_key(ref)
        column = ARTIFACTS.c.id if isinstance(key, int) else ARTIFACTS.c.uri
        found = conn.execute(select(ARTIFACTS.c.id).where(column == key)).first()
        start = ("a", int(found.id) if found else 0)
    if found is None:
        raise NotFoundError(
            f"no artifact or execution {ref!r} in the metadata store {masked!r}: pass an "
            "artifact id, an artifact URI, or e:<execution id>"
        )
    walk = _Walk(conn)
    walk.seen[start] = None
    if direction in ("upstream", "both"):
        walk.run(start, upstream=True, depth=depth)
    if direction in ("downstream", "both"):
        walk.run(start, upstream=False, depth=depth)
    return walk.graph()


class _Walk:
    """Breadth-first walk over events: one query per level and direction, ids batched."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.seen: dict[tuple[str, int], None] = {}  # ordered set of ("a"|"e", id)
        self.edges: dict[tuple[str, str, str, str], None] = {}

    def run(self, start: tuple[str, int], *, upstream: bool, depth: int) -> None:
        # Upstream: artifact <-OUTPUT- execution <-INPUT- artifact; downstream the reverse.
        to_executions = "OUTPUT" if upstream else "INPUT"
        to_artifacts = "INPUT" if upstream else "OUTPUT"
        seen_a: set[int] = set()
        seen_e: set[int] = set()
        artifacts: set[int] = set()
        executions: set[int] = set()
        layers = 0
        if start[0] == "a":
            seen_a.add(start[1])
            artifacts = set(seen_a)
        elif depth >= 1:
            seen_e.add(start[1])
            executions = set(seen_e)
            layers = 1
        while True:
            if executions:
                rows = self._events("execution_id", executions, to_artifacts)
                artifacts = {r.artifact_id for r in rows} - seen_a
                seen_a |= artifacts
                self._add(rows, "a", artifacts)
            if not artifacts or layers >= depth:
                return
            rows = self._events("artifact_id", artifacts, to_executions)
            executions = {r.execution_id for r in rows} - seen_e
            seen_e |= executions
            self._add(rows, "e", executions)
            layers += 1
            if not executions:
                return

    def _add(self, rows: list[Row[Any]], kind: str, new: set[int]) -> None:
        for r in rows:
            a, e = f"a:{r.artifact_id}", f"e:{r.execution_id}"
            pair = (a, e) if r.kind == "INPUT" else (e, a)
            self.edges[(*pair, r.kind, r.slot)] = None
        self.seen.update(dict.fromkeys((kind, i) for i in sorted(new)))

    def _events(self, column: str, ids: set[int], kind: str) -> list[Row[Any]]:
        rows: list[Row[Any]] = []
        for chunk in _chunks(sorted(ids)):
            query = select(
                EVENTS.c.execution_id, EVENTS.c.artifact_id, EVENTS.c.kind, EVENTS.c.slot
            ).where(EVENTS.c[column].in_(chunk), EVENTS.c.kind == kind)
            rows.extend(self.conn.execute(query.order_by(EVENTS.c.id)))
        return rows

    def graph(self) -> LineageGraph:
        """The nodes (in walk order, runs last) and edges, loaded in batches."""
        nodes: dict[str, dict[str, Any]] = {f"{k}:{i}": {} for k, i in self.seen}
        edges = [{"from": f, "to": t, "kind": k, "slot": s} for f, t, k, s in self.edges]
        run_ids: dict[str, None] = {}
        ids = [i for k, i in self.seen if k == "e"]
        for r in self._fetch(select(*_EXECUTION_NODE), EXECUTIONS.c.id, ids):
            node = {**r, "id": f"e:{r['id']}", "inputs": dict(r["inputs"] or {})}
            nodes[node["id"]] = {"id": node["id"], "kind": "execution", **node}
            run_ids[r["run_id"]] = None
            edges.append({"from": f"r:{r['run_id']}", "to": node["id"], "kind": "RUN", "slot": ""})
        ids = [i for k, i in self.seen if k == "a"]
        for r in self._fetch(select(*_ARTIFACT_NODE), ARTIFACTS.c.id, ids):
            node = {**r, "id": f"a:{r['id']}"}
            nodes[node["id"]] = {"id": node["id"], "kind": "artifact", **node}
        runs = select(RUNS.c.run_id, PIPELINES.c.name, RUNS.c.state).join(
            PIPELINES, PIPELINES.c.id == RUNS.c.pipeline_id
        )
        for r in self._fetch(runs, RUNS.c.run_id, list(run_ids)):
            nodes[f"r:{r['run_id']}"] = {
                "id": f"r:{r['run_id']}",
                "kind": "run",
                "pipeline": r["name"],
                "state": r["state"],
            }
        return LineageGraph(nodes=[n for n in nodes.values() if n], edges=edges)

    def _fetch(
        self, query: Select[Any], key: ColumnElement[Any], ids: list[Any]
    ) -> Iterator[RowMapping]:
        for chunk in _chunks(ids):
            yield from self.conn.execute(query.where(key.in_(chunk))).mappings()


_EXECUTION_NODE = (
    EXECUTIONS.c.id,
    EXECUTIONS.c.task,
    EXECUTIONS.c.run_id,
    EXECUTIONS.c.state,
    EXECUTIONS.c.inputs,
    EXECUTIONS.c.component,
)
_ARTIFACT_NODE = (
    ARTIFACTS.c.id,
    ARTIFACTS.c.uri,
    ARTIFACTS.c.name,
    ARTIFACTS.c.schema_title,
    ARTIFACTS.c.digest,
)
