"""Reads shared by the SQL store and its lineage walk: rows to records, batched `IN` lists.

Every function takes the open `Connection` of the caller's transaction.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Connection, Row, Select, insert, select

from headwater.errors import NotFoundError
from headwater.metadata.base import ArtifactRecord, ExecutionRecord, RunRecord
from headwater.metadata.encoding import ir_digest
from headwater.metadata.lite_sql import run_row as run_row
from headwater.metadata.schema import EXPERIMENTS, METRICS, PIPELINE_VERSIONS, RUNS

T = TypeVar("T")

#: Ids per `IN (...)`, well under SQLite's bound-parameter limit.
CHUNK = 500


def chunks(ids: Iterable[T], size: int = CHUNK) -> Iterator[list[T]]:
    """`ids` in lists of at most `size`."""
    batch: list[T] = []
    for item in ids:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def scalars(
    conn: Connection, query: Select[Any], key: ColumnElement[Any], ids: Iterable[Any]
) -> set[Any]:
    """The first column of `query` over rows whose `key` is in `ids`, batched."""
    found: set[Any] = set()
    for chunk in chunks(sorted(ids)):
        found.update(conn.execute(query.where(key.in_(chunk))).scalars())
    return found


def resolve_run_id(conn: Connection, run_id: str) -> str | None:
    """The full id of the run `run_id` names exactly or as a unique prefix.

    Raises:
        NotFoundError: The prefix matches several runs (the message lists some).
    """
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


def runs_query(*where: Any) -> Select[Any]:
    """Runs with the columns a `RunRecord` reads from their version and experiment."""
    return (
        select(
            RUNS,
            PIPELINE_VERSIONS.c.name.label("pipeline"),
            PIPELINE_VERSIONS.c.digest,
            PIPELINE_VERSIONS.c.pipeline_id,
            PIPELINE_VERSIONS.c.display_name.label("version_name"),
            EXPERIMENTS.c.display_name.label("experiment"),
        )
        .join(
            PIPELINE_VERSIONS,
            PIPELINE_VERSIONS.c.pipeline_version_id == RUNS.c.pipeline_version_id,
        )
        .outerjoin(EXPERIMENTS, EXPERIMENTS.c.experiment_id == RUNS.c.experiment_id)
        .where(*where)
    )


def run_record(r: Row[Any]) -> RunRecord:
    """A `RunRecord` (without metrics) from a row of `runs_query`."""
    return RunRecord(
        run_id=r.run_id,
        pipeline=r.pipeline,
        pipeline_version=r.digest,
        state=r.state,
        parameters=dict(r.parameters or {}),
        pipeline_root=r.pipeline_root,
        created_at=r.created_at,
        finished_at=r.finished_at,
        outputs=dict(r.outputs or {}),
        error=r.error,
        engine_host=r.engine_host,
        engine_pid=r.engine_pid,
        engine_started=r.engine_started,
        pipeline_version_id=r.pipeline_version_id,
        pipeline_id=r.pipeline_id,
        version_name=r.version_name,
        display_name=r.display_name,
        description=r.description,
        experiment_id=r.experiment_id,
        experiment=r.experiment or "",
        namespace=r.namespace,
        storage_state=r.storage_state,
        recurring_run_id=r.recurring_run_id,
        scheduled_at=r.scheduled_at,
        starts=r.starts,
        lease_until=r.lease_until,
        created_by=r.created_by,
    )


def unuploaded_version(
    conn: Connection, name: str, digest: str, ir: dict[str, Any], created_at: float
) -> str:
    """The id of the version no one uploaded of the IR `ir` under `name` (its `digest`, the
    SHA-256 of the canonical IR if empty), added if there is none."""
    digest = digest or ir_digest(ir)
    found = conn.execute(
        select(PIPELINE_VERSIONS.c.pipeline_version_id)
        .where(
            PIPELINE_VERSIONS.c.name == name,
            PIPELINE_VERSIONS.c.digest == digest,
            PIPELINE_VERSIONS.c.pipeline_id.is_(None),
        )
        .limit(1)
    ).scalar()
    if found is not None:
        return str(found)
    version_id = str(uuid.uuid4())
    conn.execute(
        insert(PIPELINE_VERSIONS).values(
            pipeline_version_id=version_id,
            pipeline_id=None,
            name=name,
            digest=digest,
            display_name="",
            description="",
            ir=ir,
            created_at=created_at,
        )
    )
    return version_id


def with_metrics(conn: Connection, runs: list[RunRecord]) -> list[RunRecord]:
    """`runs` with their scalar metrics filled in (a later execution's value of a name wins)."""
    by_id = {run.run_id: run for run in runs}
    for chunk in chunks(by_id):
        rows = conn.execute(
            select(METRICS.c.run_id, METRICS.c.name, METRICS.c.value)
            .where(METRICS.c.run_id.in_(chunk))
            .order_by(METRICS.c.id)
        )
        for m in rows:
            by_id[m.run_id].metrics[m.name] = math.nan if m.value is None else m.value
    return runs


def select_runs(
    conn: Connection, *where: Any, limit: int | None = None, offset: int = 0
) -> list[RunRecord]:
    """The runs matching `where`, newest first (the first `offset` skipped), with metrics."""
    query = runs_query(*where).order_by(RUNS.c.created_at.desc(), RUNS.c.run_id.desc())
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    return with_metrics(conn, [run_record(r) for r in conn.execute(query)])


def execution_record(row: Row[Any]) -> ExecutionRecord:
    """An `ExecutionRecord` from a row of all the executions columns."""
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
        executor=row.executor,
        worker=row.worker,
        container=row.container,
        sandbox=row.sandbox,
    )


def artifact_record(row: Row[Any]) -> ArtifactRecord:
    """An `ArtifactRecord` from a row with all the artifacts columns."""
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
        signature=row.signature,
    )
