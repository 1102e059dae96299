"""The plain SQL of a run's writes and reads on SQLite, and the two reads of ADR 16.

`lite.SqliteWriter` runs these statements on the standard library's `sqlite3`; they read and
write exactly the rows `SqlMetadataStore` does (`tests/unit/metadata/test_lite.py` compares
them). `read_artifact` and `read_cached` are the engine's per-task reads (an input's recorded
digest, the cache lookup), on any `sqlite3` connection.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from headwater.metadata.base import ArtifactRecord, EventRecord, ExecutionRecord, RunRecord
from headwater.metadata.encoding import artifact_key, json_column

#: The columns of `executions` an `ExecutionRecord` sets (all but id, run_id and task).
EXECUTION_FIELDS = (
    "component", "parent_dag", "iteration", "state", "inputs", "outputs", "cache_key",
    "cached_from", "started_at", "finished_at", "log_path", "error", "attempts", "executor",
    "worker", "container", "sandbox",
)  # fmt: skip
JSON_FIELDS = frozenset({"inputs", "outputs", "error", "container", "sandbox"})
INSERT_EXECUTION = (
    f"INSERT INTO executions (run_id, task, {', '.join(EXECUTION_FIELDS)}) "
    f"VALUES (?, ?, {', '.join('?' * len(EXECUTION_FIELDS))})"
)
UPDATE_EXECUTION = (
    f"UPDATE executions SET {', '.join(f'{f} = ?' for f in EXECUTION_FIELDS)} WHERE id = ?"
)
#: The JSON columns of `runs`.
RUN_JSON_FIELDS = frozenset({"parameters", "outputs", "error"})


def run_row(run: RunRecord, version_id: str, created_at: float) -> dict[str, Any]:
    """The `runs` row of a new run of version `version_id`."""
    return {
        "run_id": run.run_id,
        "pipeline_version_id": version_id,
        "state": run.state or "RUNNING",
        "parameters": run.parameters,
        "pipeline_root": run.pipeline_root,
        "created_at": created_at,
        "finished_at": run.finished_at,
        "outputs": run.outputs,
        "error": run.error,
        "engine_host": run.engine_host,
        "engine_pid": run.engine_pid,
        "engine_started": run.engine_started,
        "display_name": run.display_name,
        "description": run.description,
        "experiment_id": run.experiment_id,
        "namespace": run.namespace,
        "storage_state": run.storage_state,
        "recurring_run_id": run.recurring_run_id,
        "scheduled_at": run.scheduled_at,
        "starts": run.starts,
        "lease_until": run.lease_until,
        "created_by": run.created_by,
    }


_ARTIFACT_COLUMNS = (
    "id, uri, schema_title, name, digest, size, signature, metadata, producer, created_at"
)
_EXECUTION_COLUMNS = ("id", "run_id", "task", *EXECUTION_FIELDS)
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
            name: _json_value(value) if name in JSON_FIELDS else value
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


def execution_values(execution: ExecutionRecord) -> tuple[Any, ...]:
    """`EXECUTION_FIELDS` of `execution`, JSON columns as their text."""
    return tuple(
        json_column(getattr(execution, f)) if f in JSON_FIELDS else getattr(execution, f)
        for f in EXECUTION_FIELDS
    )


def _json_value(text: Any) -> Any:
    return None if text is None else json.loads(text)
