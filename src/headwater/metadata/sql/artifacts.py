"""`SqlMetadataStore`'s artifacts, events and metrics; the cache lookup and lineage."""

from __future__ import annotations

import math
import time
from typing import Any, Literal, cast

from sqlalchemy import Connection, bindparam, delete, insert, select, update

from headwater.errors import InvalidArgumentError
from headwater.metadata.base import (
    ArtifactRecord,
    Direction,
    EventRecord,
    ExecutionRecord,
    LineageGraph,
    StepSeriesRecord,
)
from headwater.metadata.encoding import artifact_key, step_points
from headwater.metadata.lineage import lineage_graph
from headwater.metadata.queries import artifact_record, chunks, execution_record
from headwater.metadata.schema import ARTIFACTS, EVENTS, EXECUTIONS, METRICS, STEP_METRICS
from headwater.metadata.sql.base import SqlStoreBase


class ArtifactRecords(SqlStoreBase):
    """The artifacts, events, metrics, cache and lineage of `SqlMetadataStore`."""

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

    def record_step_metrics(self, series: list[StepSeriesRecord]) -> None:
        """Store metrics over steps, replacing a series of the same name, execution and
        artifact.

        Raises:
            InvalidArgumentError: A step is not a whole number or a value not a number.
        """
        try:
            rows = [
                {
                    "run_id": s.run_id,
                    "execution_id": s.execution_id,
                    "artifact_id": s.artifact_id,
                    "name": s.name,
                    "points": step_points(s.name, s.points),
                    "logged": int(s.logged),
                }
                for s in series
            ]
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"step metrics: {exc}") from exc
        if not rows:
            return

        def write(conn: Connection) -> None:
            for row in rows:
                conn.execute(
                    delete(STEP_METRICS).where(
                        STEP_METRICS.c.run_id == row["run_id"],
                        STEP_METRICS.c.execution_id == row["execution_id"],
                        STEP_METRICS.c.artifact_id == row["artifact_id"],
                        STEP_METRICS.c.name == row["name"],
                    )
                )
            conn.execute(insert(STEP_METRICS), rows)

        runs = sorted({str(s.run_id) for s in series})
        self._db.transaction(write, write=True, refers_to=f"run {', '.join(map(repr, runs))}")

    def list_step_metrics(self, run_ids: list[str]) -> list[StepSeriesRecord]:
        """The series of these runs, by run (in the order given), execution and name."""
        if not run_ids:
            return []

        def read(conn: Connection) -> list[StepSeriesRecord]:
            found = conn.execute(
                select(STEP_METRICS)
                .where(STEP_METRICS.c.run_id.in_(run_ids))
                .order_by(STEP_METRICS.c.execution_id, STEP_METRICS.c.name, STEP_METRICS.c.id)
            ).all()
            return [
                StepSeriesRecord(
                    run_id=r.run_id,
                    execution_id=r.execution_id,
                    artifact_id=r.artifact_id,
                    name=r.name,
                    points=[(int(p[0]), None if p[1] is None else float(p[1])) for p in r.points],
                    logged=r.logged,
                )
                for r in found
            ]

        order = {run_id: n for n, run_id in enumerate(run_ids)}
        return sorted(self._db.transaction(read), key=lambda s: order[s.run_id])

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
_ARTIFACT_BY_URI = select(ARTIFACTS).where(ARTIFACTS.c.uri == bindparam("uri"))
_ARTIFACT_BY_ID = select(ARTIFACTS).where(ARTIFACTS.c.id == bindparam("id"))
