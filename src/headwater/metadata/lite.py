"""`SqliteWriter`: a run's writes and reads on a SQLite store with the standard library's `sqlite3`.

Importing SQLAlchemy costs more CPU than everything else `headwater run` does (ADR 8, ADR 16).
A run records through a handful of writes (`MetadataRecorder`) and reads through two (the
cache lookup and an input's recorded digest): the `RunRecorder` interface. For a SQLite file
that exists at the newest schema (`SqliteWriter.for_url`) `metadata.open_run_stores` gives
the run this writer, and a run never imports SQLAlchemy.

Each method does what `SqlMetadataStore`'s method of the same name does, with the same rows,
the same JSON text (`encoding.json_column`), the same transactions (the settings in
`sqlite`) and the same errors. The shared store scenarios run every one of them with the
rest of the store read back through SQLAlchemy, and a test replays one sequence of writes
through both and compares every row.
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from headwater.errors import InvalidArgumentError, NotFoundError, UserError
from headwater.metadata.base import (
    SCHEMA_HEAD,
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    RunRecord,
    StepSeriesRecord,
)
from headwater.metadata.encoding import ir_digest, json_column, step_points
from headwater.metadata.lite_db import LiteDatabase
from headwater.metadata.lite_sql import (
    INSERT_EXECUTION,
    RUN_JSON_FIELDS,
    UPDATE_EXECUTION,
    execution_values,
    read_artifact,
    read_cached,
    run_row,
)
from headwater.metadata.reconcile import INTERRUPTED_TASK_ERROR, engine_dead
from headwater.metadata.sqlite import connect_file

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")

#: A SQLite URL with an absolute path and no options: the only kind probed without SQLAlchemy.
_PREFIX = "sqlite:////"


class SqliteWriter(LiteDatabase):
    """A run's writes to, and reads of, the SQLite database file `path` (see the module
    docstring); it implements `RunRecorder`.

    The connection is opened on first use. It then checks that the schema is still the one
    this code writes (`SCHEMA_HEAD`), and marks runs whose engine died INTERRUPTED, as opening
    the store does (`reconcile.mark_dead_runs`). Thread-safe: one thread at a time uses the
    connection; `batch()` holds it for its block.

    Args:
        path: The database file.
        url: Its URL, for messages.
        reader: A connection of its own for the engine's reads (`get_artifact`,
            `cached_outputs`): in WAL mode they never wait behind the writer's transaction.
            Without one (or if it fails), and on the thread inside `batch()`, whose reads
            must see its own writes, the writer's connection answers.
    """

    def __init__(self, path: Path, url: str, *, reader: sqlite3.Connection | None = None) -> None:
        super().__init__(path, url)
        self._runs_seen: set[str] = set()
        self._reader = reader
        self._reader_lock = threading.Lock()
        if reader is not None:
            # A run never calls close() (its writer lives as long as the run): the
            # connections still close, without a ResourceWarning, when it is collected.
            weakref.finalize(self, reader.close)

    @classmethod
    def for_url(cls, url: str) -> SqliteWriter | None:
        """A writer for `url`, or None if the store must be opened through SQLAlchemy.

        Only for `sqlite:////absolute/path` (no query options) naming a database file that
        exists and whose schema is `SCHEMA_HEAD`: SQLAlchemy, opened later, can then neither
        create, migrate nor refuse anything that opening it now would have. The connection
        that checked the schema is kept as the writer's `reader`.
        """
        if not url.startswith(_PREFIX) or "?" in url:
            return None
        # Percent-decoded, as SQLAlchemy reads the URL.
        path = Path(unquote(url[len(_PREFIX) - 1 :]))
        if not path.is_file():
            return None
        try:
            probe = connect_file(path)
        except sqlite3.Error:
            return None
        try:
            rows = probe.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.Error:
            rows = []
        if rows != [(SCHEMA_HEAD,)]:
            probe.close()
            return None
        return cls(path, url, reader=probe)

    def __repr__(self) -> str:
        # The store it writes, named as `SqlMetadataStore` names itself: a run's warnings
        # read the same whichever of the two recorded it.
        return f"SqlMetadataStore({self.url!r})"

    def close(self) -> None:
        """Close both connections."""
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        super().close()

    def _on_open(self, conn: sqlite3.Connection) -> None:
        """Mark runs whose engine died INTERRUPTED (CANCELED if being canceled), as opening
        the store does (`SqlMetadataStore.mark_interrupted`)."""
        rows = conn.execute(
            "SELECT run_id, state, engine_host, engine_pid, engine_started FROM runs "
            "WHERE state IN ('RUNNING', 'CANCELING')"
        ).fetchall()
        for run_id, state, host, pid, started in rows:
            record = RunRecord(
                run_id, "", "", state, engine_host=host, engine_pid=pid, engine_started=started
            )
            if not engine_dead(record):
                continue
            now = time.time()
            done = conn.execute(
                "UPDATE runs SET finished_at = ?, state = CASE WHEN state = 'CANCELING' "
                "THEN 'CANCELED' ELSE 'INTERRUPTED' END WHERE run_id = ? "
                "AND state IN ('RUNNING', 'CANCELING') AND engine_host = ? AND engine_pid = ?",
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
        digest = run.pipeline_version or ir_digest(ir)
        now = run.created_at or time.time()

        def write(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
                raise UserError(
                    f"run id {run.run_id!r} is taken by an earlier run: choose another id, "
                    "or resume that run"
                )
            version = run.pipeline_version_id
            if version:
                found = conn.execute(
                    "SELECT 1 FROM pipeline_versions WHERE pipeline_version_id = ?", (version,)
                ).fetchone()
                if found is None:
                    raise NotFoundError(f"no pipeline version {version!r}")
            else:
                version = _unuploaded_version(conn, run.pipeline, digest, ir, now)
            row = run_row(run, version, now)
            values = [json_column(v) if k in RUN_JSON_FIELDS else v for k, v in row.items()]
            conn.execute(
                f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                values,
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
        engine_host: str | None = None,
        engine_pid: int | None = None,
    ) -> None:
        """`SqlMetadataStore.finish_run`."""

        # A run being canceled that did not succeed is CANCELED (`MetadataStore.finish_run`).
        ended = (
            "?"
            if state == "SUCCEEDED"
            else "CASE WHEN state = 'CANCELING' THEN 'CANCELED' ELSE ? END"
        )

        held, holder = "", []  # only while that engine holds it (`SqlMetadataStore.finish_run`)
        if engine_host is not None and engine_pid is not None:
            held = " AND engine_host = ? AND engine_pid = ? AND state IN ('RUNNING', 'CANCELING')"
            holder = [engine_host, engine_pid]

        def write(conn: sqlite3.Connection) -> None:
            done = conn.execute(
                f"UPDATE runs SET state = {ended}, outputs = ?, error = ?, finished_at = ? "
                f"WHERE run_id = ?{held}",
                (state, json_column(outputs), json_column(error), finished_at, run_id, *holder),
            )
            exists = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if done.rowcount == 0 and exists is None:
                raise NotFoundError(f"no run {run_id!r} in the metadata store {self.url!r}")

        self._transaction(write)

    # -- executions, artifacts, events, metrics ---------------------------------------------

    def record_execution(self, execution: ExecutionRecord) -> int:
        """`SqlMetadataStore.record_execution`."""
        values = execution_values(execution)

        def write(conn: sqlite3.Connection) -> int:
            found = conn.execute(
                "SELECT id FROM executions WHERE run_id = ? AND task = ?",
                (execution.run_id, execution.task),
            ).fetchone()
            if found is not None:
                conn.execute(UPDATE_EXECUTION, (*values, found[0]))
                return int(found[0])
            suffix = f"for execution {execution.task!r}: create the run first"
            self._check_runs(conn, {execution.run_id}, suffix)
            cursor = conn.execute(INSERT_EXECUTION, (execution.run_id, execution.task, *values))
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
                cursor = conn.execute(INSERT_EXECUTION, (e.run_id, e.task, *execution_values(e)))
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
        """`SqlMetadataStore.get_artifact`, on the reader (see the class docstring)."""
        return self._read(lambda conn: read_artifact(conn, ref))

    def cached_outputs(
        self, cache_key: str
    ) -> tuple[ExecutionRecord, list[tuple[EventRecord, ArtifactRecord]]] | None:
        """`SqlMetadataStore.cached_outputs`, on the reader (see the class docstring)."""
        if not cache_key:
            return None
        return self._read(lambda conn: read_cached(conn, cache_key))

    def _read(self, read: Callable[[sqlite3.Connection], T]) -> T:
        """`read` in one transaction on the reader; on the thread inside `batch()`, without
        a reader, or if it fails, on the writer's connection."""
        if not self.batching_here():
            with self._reader_lock:
                if self._reader is not None:
                    try:
                        self._reader.execute("BEGIN")
                        try:
                            return read(self._reader)
                        finally:
                            self._reader.execute("COMMIT")
                    except sqlite3.Error:
                        pass
        return self._transaction(read, write=False)

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

    def record_step_metrics(self, series: list[StepSeriesRecord]) -> None:
        """`SqlMetadataStore.record_step_metrics`."""
        try:
            rows = [
                (
                    s.run_id,
                    s.execution_id,
                    s.artifact_id,
                    s.name,
                    json_column(step_points(s.name, s.points)),
                    int(s.logged),
                )
                for s in series
            ]
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"step metrics: {exc}") from exc
        if not rows:
            return

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM step_metrics WHERE run_id = ? AND execution_id = ? "
                "AND artifact_id = ? AND name = ?",
                [row[:4] for row in rows],
            )
            conn.executemany(
                "INSERT INTO step_metrics (run_id, execution_id, artifact_id, name, points, "
                "logged) VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

        runs = sorted({row[0] for row in rows})
        self._transaction(write, refers_to=f"run {', '.join(map(repr, runs))}")


def _unuploaded_version(
    conn: sqlite3.Connection, name: str, digest: str, ir: dict[str, Any], created_at: float
) -> str:
    """`queries.unuploaded_version` on `sqlite3`."""
    found = conn.execute(
        "SELECT pipeline_version_id FROM pipeline_versions "
        "WHERE name = ? AND digest = ? AND pipeline_id IS NULL LIMIT 1",
        (name, digest),
    ).fetchone()
    if found is not None:
        return str(found[0])
    version_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO pipeline_versions (pipeline_version_id, pipeline_id, name, digest, "
        "display_name, description, ir, created_at) VALUES (?, NULL, ?, ?, '', '', ?, ?)",
        (version_id, name, digest, json_column(ir), created_at),
    )
    return version_id
