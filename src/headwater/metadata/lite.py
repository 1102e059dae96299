"""`SqliteWriter`: the engine's writes to a SQLite store with the standard library's `sqlite3`.

Importing SQLAlchemy costs more CPU than everything else `headwater run` does (ADR 8, ADR 16).
A run records through a handful of writes (`MetadataRecorder`) and reads through two
(`read_cached`, `read_artifact`), so for a SQLite file that exists at the newest schema
(`DeferredSqlStore`) they are made here, as plain SQL, and a run never imports SQLAlchemy.

Each method does what `SqlMetadataStore`'s method of the same name does, with the same rows,
the same JSON text (`encoding.json_column`), the same transactions (`BEGIN IMMEDIATE`, WAL,
a 30 s busy timeout, locked writes retried) and the same errors. The shared store scenarios
run every one of them through `DeferredSqlStore`, and a test replays one sequence of writes
through both and compares every row.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from headwater.errors import (
    HeadwaterSystemError,
    InvalidArgumentError,
    NotFoundError,
    StorageError,
    UserError,
)
from headwater.metadata.base import (
    SCHEMA_HEAD,
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    RunRecord,
)
from headwater.metadata.encoding import artifact_key, ir_digest, json_column
from headwater.metadata.reconcile import INTERRUPTED_TASK_ERROR, engine_dead

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

T = TypeVar("T")

# As in `connect`: the busy timeout, and attempts for a write still locked after it.
_BUSY_TIMEOUT_MS = 30_000
_WRITE_ATTEMPTS = 4

_EXECUTION_FIELDS = (
    "component", "parent_dag", "iteration", "state", "inputs", "outputs", "cache_key",
    "cached_from", "started_at", "finished_at", "log_path", "error", "attempts", "executor",
    "worker",
)  # fmt: skip
_JSON_FIELDS = frozenset({"inputs", "outputs", "error"})
_INSERT_EXECUTION = (
    f"INSERT INTO executions (run_id, task, {', '.join(_EXECUTION_FIELDS)}) "
    f"VALUES (?, ?, {', '.join('?' * len(_EXECUTION_FIELDS))})"
)
_UPDATE_EXECUTION = (
    f"UPDATE executions SET {', '.join(f'{f} = ?' for f in _EXECUTION_FIELDS)} WHERE id = ?"
)
_ARTIFACT_COLUMNS = (
    "id, uri, schema_title, name, digest, size, signature, metadata, producer, created_at"
)
_EXECUTION_COLUMNS = ("id", "run_id", "task", *_EXECUTION_FIELDS)
# The rows `SqlMetadataStore.find_cached` reads, in its order.
_CACHED = (
    f"SELECT {', '.join(_EXECUTION_COLUMNS)} FROM executions "
    "WHERE cache_key = ? AND state = 'SUCCEEDED' "
    "ORDER BY finished_at IS NULL, finished_at DESC, id DESC LIMIT 1"
)
_ARTIFACTS_OF = (
    'SELECT events.kind, events.slot, events."index", '
    + ", ".join(f"artifacts.{c.strip()}" for c in _ARTIFACT_COLUMNS.split(","))
    + " FROM events JOIN artifacts ON artifacts.id = events.artifact_id "
    'WHERE events.execution_id = ? ORDER BY events.kind, events.slot, events."index", events.id'
)


class SqliteWriter:
    """The recorder's writes to the SQLite database file `path` (see the module docstring).

    The connection is opened on first use. It then checks that the schema is still the one
    this code writes (`SCHEMA_HEAD`), and marks runs whose engine died INTERRUPTED, as opening
    the store does (`reconcile.mark_dead_runs`). Thread-safe: one thread at a time uses the
    connection; `batch()` holds it for its block.
    """

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._batch_thread: int | None = None  # the thread inside batch(), if any
        self._batch_broken = False
        self._runs_seen: set[str] = set()

    def batching_here(self) -> bool:
        """True on the thread that is inside `batch()`: its reads must see its own writes."""
        return self._batch_thread == threading.get_ident()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                conn = sqlite3.connect(
                    f"{self.path.as_uri()}?mode=rw", uri=True, check_same_thread=False
                )
            except sqlite3.Error as exc:
                raise self._open_error(exc) from exc
            try:
                conn.isolation_level = None  # we BEGIN ourselves (IMMEDIATE for writes)
                conn.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                self._run(conn, self._check_schema, write=False)
                self._run(conn, self._mark_dead_runs)
            except BaseException as exc:
                conn.close()
                if isinstance(exc, sqlite3.Error):
                    raise self._open_error(exc) from exc
                raise
            self._conn = conn
        return self._conn

    def _open_error(self, exc: sqlite3.Error) -> StorageError:
        return StorageError(
            f"cannot open metadata store {self.url!r}: {_first_line(exc)}: "
            "check that the path is a writable SQLite database file"
        )

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Refuse a store whose schema changed since it was probed (a newer Headwater
        migrated it meanwhile): these statements are written for `SCHEMA_HEAD` only."""
        found = [v for (v,) in conn.execute("SELECT version_num FROM alembic_version")]
        if found != [SCHEMA_HEAD]:
            raise StorageError(
                f"metadata store {self.url!r} has schema {', '.join(found) or 'none'}, not "
                f"{SCHEMA_HEAD!r}, which this Headwater writes: upgrade headwater, or use "
                "another metadata URL"
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- transactions -----------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write of this thread inside the block in one write transaction."""
        with self._lock:
            if self.batching_here():
                yield
                return
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._storage_error(exc) from exc
            self._batch_thread = threading.get_ident()
            self._batch_broken = False
            try:
                yield
            except BaseException:
                _rollback(conn)
                raise
            finally:
                self._batch_thread = None
            try:
                if self._batch_broken:  # SQLite ended it after an error the caller caught
                    raise sqlite3.OperationalError("the transaction was rolled back by SQLite")
                _commit(conn)
            except sqlite3.Error as exc:
                _rollback(conn)
                raise self._storage_error(exc) from exc

    def _transaction(
        self, fn: Callable[[sqlite3.Connection], T], *, refers_to: str = "", write: bool = True
    ) -> T:
        """`fn` in one transaction (or the open batch's); errors as the SQL store's."""
        with self._lock:
            conn = self._connection()
            if not self.batching_here():
                return self._run(conn, fn, refers_to=refers_to, write=write)
            if self._batch_broken:
                raise StorageError(
                    f"metadata store {self.url!r} failed: an earlier write of this batch ended "
                    "its transaction, so nothing more of it is written"
                )
            try:
                return fn(conn)
            except sqlite3.Error as exc:
                if not conn.in_transaction:  # SQLite rolled the whole batch back
                    self._batch_broken = True
                self._raise(exc, refers_to)

    def _run(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection], T],
        *,
        refers_to: str = "",
        write: bool = True,
    ) -> T:
        """`fn` in a transaction of its own on `conn`: locked writes retried, as `connect`."""
        attempt = 0
        while True:
            attempt += 1
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = fn(conn)
                except BaseException:
                    _rollback(conn)
                    raise
                _commit(conn)
                return result
            except sqlite3.OperationalError as exc:
                if write and _is_locked(exc) and attempt < _WRITE_ATTEMPTS:
                    time.sleep(0.05 * 4**attempt)
                    continue
                self._raise(exc, refers_to)
            except sqlite3.IntegrityError as exc:
                if write and attempt < 2:
                    continue
                self._raise(exc, refers_to)
            except sqlite3.Error as exc:
                self._raise(exc, refers_to)

    def _raise(self, exc: sqlite3.Error, refers_to: str) -> NoReturn:
        """Raise what `SqlMetadataStore` raises for this driver error: a missing reference
        is NotFoundError, a failing database StorageError, and a value the driver cannot
        bind goes through as it is, as there."""
        if isinstance(exc, sqlite3.IntegrityError):
            raise self._integrity_error(exc, refers_to) from exc
        if isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError):
            raise exc
        raise self._storage_error(exc) from exc

    def _storage_error(self, exc: sqlite3.Error) -> StorageError:
        return StorageError(
            f"metadata store {self.url!r} failed: {_first_line(exc)}: "
            "check that the database is reachable and not locked by another program"
        )

    def _integrity_error(self, exc: sqlite3.IntegrityError, refers_to: str) -> Exception:
        if not refers_to:
            return HeadwaterSystemError(
                f"metadata store {self.url!r} refused a write: {_first_line(exc)}"
            )
        return NotFoundError(
            f"{refers_to} is not in the metadata store {self.url!r} "
            f"({_first_line(exc)}): record it first"
        )

    def _mark_dead_runs(self, conn: sqlite3.Connection) -> None:
        rows = conn.execute(
            "SELECT run_id, engine_host, engine_pid FROM runs WHERE state = 'RUNNING'"
        ).fetchall()
        for run_id, host, pid in rows:
            if not engine_dead(
                RunRecord(run_id, "", "", "RUNNING", engine_host=host, engine_pid=pid)
            ):
                continue
            now = time.time()
            done = conn.execute(
                "UPDATE runs SET state = 'INTERRUPTED', finished_at = ? WHERE run_id = ? "
                "AND state = 'RUNNING' AND engine_host = ? AND engine_pid = ?",
                (now, run_id, host, pid),
            )
            if done.rowcount:
                conn.execute(
                    "UPDATE executions SET state = 'FAILED', finished_at = ?, error = ? "
                    "WHERE run_id = ? AND state = 'RUNNING'",
                    (now, json_column(INTERRUPTED_TASK_ERROR), run_id),
                )

    # -- runs -------------------------------------------------------------------------------

    def create_run(self, run: RunRecord, *, ir: dict[str, Any]) -> None:
        """`SqlMetadataStore.create_run`."""
        version = run.pipeline_version or ir_digest(ir)
        now = run.created_at or time.time()

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                raise UserError(
                    f"run id {run.run_id!r} is taken by an earlier run: choose another id, "
                    "or resume that run"
                )
            found = conn.execute(
                "SELECT id FROM pipelines WHERE name = ? AND version = ?",
                (run.pipeline, version),
            ).fetchone()
            if found is None:
                pipeline_id = conn.execute(
                    "INSERT INTO pipelines (name, version, ir, created_at) VALUES (?, ?, ?, ?)",
                    (run.pipeline, version, json_column(ir), now),
                ).lastrowid
            else:
                pipeline_id = found[0]
            conn.execute(
                "INSERT INTO runs (run_id, pipeline_id, state, parameters, pipeline_root, "
                "created_at, finished_at, outputs, error, engine_host, engine_pid) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    pipeline_id,
                    run.state or "RUNNING",
                    json_column(run.parameters),
                    run.pipeline_root,
                    now,
                    run.finished_at,
                    json_column(run.outputs),
                    json_column(run.error),
                    run.engine_host,
                    run.engine_pid,
                ),
            )

        self._transaction(write)

    def finish_run(
        self,
        run_id: str,
        *,
        state: str,
        outputs: dict[str, Any],
        error: dict[str, Any] | None,
        finished_at: float,
    ) -> None:
        """`SqlMetadataStore.finish_run`."""

        def write(conn: sqlite3.Connection) -> None:
            done = conn.execute(
                "UPDATE runs SET state = ?, outputs = ?, error = ?, finished_at = ? "
                "WHERE run_id = ?",
                (state, json_column(outputs), json_column(error), finished_at, run_id),
            )
            if done.rowcount == 0:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")

        self._transaction(write)

    # -- executions, artifacts, events, metrics ---------------------------------------------

    def record_execution(self, execution: ExecutionRecord) -> int:
        """`SqlMetadataStore.record_execution`."""
        values = _execution_values(execution)

        def write(conn: sqlite3.Connection) -> int:
            found = conn.execute(
                "SELECT id FROM executions WHERE run_id = ? AND task = ?",
                (execution.run_id, execution.task),
            ).fetchone()
            if found is not None:
                conn.execute(_UPDATE_EXECUTION, (*values, found[0]))
                return int(found[0])
            suffix = f"for execution {execution.task!r}: create the run first"
            self._check_runs(conn, {execution.run_id}, suffix)
            cursor = conn.execute(_INSERT_EXECUTION, (execution.run_id, execution.task, *values))
            return int(cursor.lastrowid or 0)

        cached_from = f"execution {execution.cached_from} (cached_from)"
        return self._transaction(write, refers_to=cached_from)

    def insert_executions(self, executions: list[ExecutionRecord]) -> list[int]:
        """`SqlMetadataStore.insert_executions`."""
        if not executions:
            return []

        def write(conn: sqlite3.Connection) -> list[int]:
            self._check_runs(conn, {e.run_id for e in executions}, "for these executions")
            ids = []
            for e in executions:
                cursor = conn.execute(_INSERT_EXECUTION, (e.run_id, e.task, *_execution_values(e)))
                ids.append(int(cursor.lastrowid or 0))
            return ids

        return self._transaction(write, refers_to="a cached_from execution")

    def _check_runs(self, conn: sqlite3.Connection, run_ids: set[str], suffix: str) -> None:
        """Raise NotFoundError ("no run X " + suffix) unless every run exists."""
        for run_id in sorted(run_ids - self._runs_seen):
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise NotFoundError(f"no run {run_id!r} {suffix}")
        self._runs_seen.update(run_ids)

    def record_artifact(self, artifact: ArtifactRecord) -> int:
        """`SqlMetadataStore.record_artifact`."""

        def write(conn: sqlite3.Connection) -> int:
            found = conn.execute(
                "SELECT id, producer FROM artifacts WHERE uri = ?", (artifact.uri,)
            ).fetchone()
            values: dict[str, Any] = {
                "schema_title": artifact.schema_title,
                "name": artifact.name,
                "metadata": json_column(artifact.metadata),
            }
            if artifact.digest is not None:
                values["digest"] = artifact.digest
                values["signature"] = artifact.signature
            if artifact.size is not None:
                values["size"] = artifact.size
            if found is not None:
                if found[1] is None and artifact.producer is not None:
                    values["producer"] = artifact.producer
                assignments = ", ".join(f"{name} = ?" for name in values)
                conn.execute(
                    f"UPDATE artifacts SET {assignments} WHERE id = ?", (*values.values(), found[0])
                )
                return int(found[0])
            values.update(
                uri=artifact.uri,
                producer=artifact.producer,
                created_at=artifact.created_at or time.time(),
            )
            cursor = conn.execute(
                f"INSERT INTO artifacts ({', '.join(values)}) "
                f"VALUES ({', '.join('?' * len(values))})",
                tuple(values.values()),
            )
            return int(cursor.lastrowid or 0)

        return self._transaction(write, refers_to=f"producer execution {artifact.producer}")

    def get_artifact(self, ref: int | str) -> ArtifactRecord | None:
        """`SqlMetadataStore.get_artifact`."""
        return self._transaction(lambda conn: read_artifact(conn, ref), write=False)

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
        """`SqlMetadataStore.cached_outputs`."""
        return self._transaction(lambda conn: read_cached(conn, cache_key), write=False)

    def record_event(self, event: EventRecord) -> None:
        """`SqlMetadataStore.record_event`."""
        missing = f"execution {event.execution_id} or artifact {event.artifact_id}"
        self._insert_events([event], missing)

    def record_events(self, events: list[EventRecord]) -> None:
        """`SqlMetadataStore.record_events`."""
        self._insert_events(events, "an execution or artifact of these events")

    def _insert_events(self, events: list[EventRecord], missing: str) -> None:
        if not events:
            return
        for event in events:
            if event.kind not in ("INPUT", "OUTPUT"):
                raise InvalidArgumentError(
                    f"event kind {event.kind!r}: expected 'INPUT' or 'OUTPUT'"
                )
        rows = [(e.execution_id, e.artifact_id, e.kind, e.slot, e.index) for e in events]
        self._transaction(
            lambda conn: conn.executemany(
                'INSERT INTO events (execution_id, artifact_id, kind, slot, "index") '
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                rows,
            ),
            refers_to=missing,
        )

    def record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, metrics: dict[str, float]
    ) -> None:
        """`SqlMetadataStore.record_metrics`."""
        try:
            values = {name: float(value) for name, value in metrics.items()}
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"metrics of run {run_id!r} must be numbers, got {metrics!r}"
            ) from exc
        if not values:
            return
        rows = [
            (run_id, execution_id, artifact_id, name, None if math.isnan(value) else value)
            for name, value in values.items()
        ]

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM metrics WHERE run_id = ? AND execution_id = ? AND artifact_id = ? "
                f"AND name IN ({', '.join('?' * len(values))})",
                (run_id, execution_id, artifact_id, *values),
            )
            conn.executemany(
                "INSERT INTO metrics (run_id, execution_id, artifact_id, name, value) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

        self._transaction(write, refers_to=f"run {run_id!r}")


# -- reads on any connection (the engine's are made on `DeferredSqlStore`'s probe) -------------


def read_artifact(conn: sqlite3.Connection, ref: int | str) -> ArtifactRecord | None:
    """The artifact `ref` names (an id, "a:<id>" or a URI), as `SqlMetadataStore.get_artifact`."""
    key = artifact_key(ref)
    column = "id" if isinstance(key, int) else "uri"
    row = conn.execute(
        f"SELECT {_ARTIFACT_COLUMNS} FROM artifacts WHERE {column} = ?", (key,)
    ).fetchone()
    return None if row is None else _artifact_record(row)


def read_cached(
    conn: sqlite3.Connection, cache_key: str
) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
    """The newest SUCCEEDED execution with `cache_key` and its events and artifacts, as
    `SqlMetadataStore.cached_outputs` (call it inside one read transaction)."""
    if not cache_key:
        return None
    row = conn.execute(_CACHED, (cache_key,)).fetchone()
    if row is None:
        return None
    execution = ExecutionRecord(
        **{
            name: _json_value(value) if name in _JSON_FIELDS else value
            for name, value in zip(_EXECUTION_COLUMNS, row, strict=True)
        }
    )
    execution.inputs = dict(execution.inputs or {})
    execution.outputs = dict(execution.outputs or {})
    events = []
    for kind, slot, index, *artifact in conn.execute(_ARTIFACTS_OF, (execution.id,)):
        record = _artifact_record(tuple(artifact))
        events.append((EventRecord(execution.id or 0, record.id or 0, kind, slot, index), record))
    return execution, events


def _artifact_record(row: tuple[Any, ...]) -> ArtifactRecord:
    id_, uri, schema_title, name, digest, size, signature, metadata, producer, created = row
    return ArtifactRecord(
        id=id_,
        uri=uri,
        schema_title=schema_title,
        name=name,
        digest=digest,
        size=size,
        metadata=dict(_json_value(metadata) or {}),
        producer=producer,
        created_at=created,
        signature=signature,
    )


def _execution_values(execution: ExecutionRecord) -> tuple[Any, ...]:
    return tuple(
        json_column(getattr(execution, f)) if f in _JSON_FIELDS else getattr(execution, f)
        for f in _EXECUTION_FIELDS
    )


def _json_value(text: Any) -> Any:
    return None if text is None else json.loads(text)


def _commit(conn: sqlite3.Connection) -> None:
    """COMMIT; if that fails, roll back what is left, so the connection is never left inside
    a transaction (a later BEGIN would fail) and nothing half-written is kept."""
    try:
        conn.execute("COMMIT")
    except sqlite3.Error:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    """ROLLBACK if a transaction is open (SQLite ends some on its own, e.g. when the disk
    is full); never hides the error that led here."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(exc).__name__


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text
