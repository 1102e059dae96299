"""The data moves of revision 0008 (`versions/v0008_one_run_system.py`): reading the KFP tables
of 0007, the versions table's writer, merging `kfp_runs` into `runs`, and, going back, filling
0007's KFP tables again. Kept apart so that each module stays readable."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from alembic import op

from headwater.metadata.encoding import ir_digest

#: KFP run states of `kfp_runs` -> the run's state, for runs no worker had started.
NEVER_STARTED = {
    "PENDING": "QUEUED",
    "RUNNING": "QUEUED",  # claimed by a server that died before its worker recorded it
    "CANCELING": "CANCELED",
    "CANCELED": "CANCELED",
    "FAILED": "FAILED",
    "SUCCEEDED": "SUCCEEDED",
    "SKIPPED": "SUCCEEDED",
}
JSON = sa.JSON(none_as_null=True)
#: States only a run the server took can be in.
_SERVER_ONLY = ("QUEUED", "CANCELING", "CANCELED")


def json_value(value: Any) -> Any:
    """A JSON column's value: SQLite's driver gives text, PostgreSQL's the parsed value."""
    return json.loads(value) if isinstance(value, str) else value


def rows_of(bind: sa.Connection, table: str) -> list[dict[str, Any]]:
    if not sa.inspect(bind).has_table(table):
        return []
    return [dict(r._mapping) for r in bind.execute(sa.text(f"SELECT * FROM {table}"))]


def ir_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored KFP spec (the IR, or `{pipeline_spec, platform_spec}`) as the IR document a
    run keeps: the platform spec's `platforms` inside it, as `spec.ir.parse_pipeline` keeps it."""
    if "root" not in spec and isinstance(spec.get("pipeline_spec"), Mapping):
        platform = spec.get("platform_spec")
        platforms = platform.get("platforms", platform) if isinstance(platform, Mapping) else None
        doc = dict(spec["pipeline_spec"])
        return {**doc, "platforms": dict(platforms)} if platforms else doc
    return dict(spec)


def ir_name(ir: Mapping[str, Any]) -> str:
    info = ir.get("pipelineInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) and name else "pipeline"


class Versions:
    """Writes `pipeline_versions` rows; finds or adds the unuploaded version of an IR."""

    def __init__(self, bind: sa.Connection) -> None:
        self.bind = bind
        self.table = sa.table(
            "pipeline_versions",
            *(
                sa.column(n)
                for n in ("pipeline_version_id", "pipeline_id", "name", "digest", "display_name")
            ),
            sa.column("description"),
            sa.column("ir", JSON),
            sa.column("created_at"),
        )
        self._implicit: dict[tuple[str, str], str] = {}
        #: Every version written.
        self.ids: set[str] = set()

    def add(self, row: dict[str, Any]) -> str:
        self.bind.execute(self.table.insert().values(**row))
        self.ids.add(row["pipeline_version_id"])
        if row["pipeline_id"] is None:
            self._implicit[(row["name"], row["digest"])] = row["pipeline_version_id"]
        return str(row["pipeline_version_id"])

    def implicit(self, ir: dict[str, Any], created_at: float) -> str:
        name, digest = ir_name(ir), ir_digest(ir)
        found = self._implicit.get((name, digest))
        if found is not None:
            return found
        return self.add(
            {
                "pipeline_version_id": str(uuid.uuid4()),
                "pipeline_id": None,
                "name": name,
                "digest": digest,
                "display_name": "",
                "description": "",
                "ir": ir,
                "created_at": created_at,
            }
        )


def dropped(kind: str, ident: str, why: str) -> None:
    """Say that a record 0008 cannot hold is left behind (0007 let its references dangle)."""
    logging.getLogger("headwater.metadata.migrations").warning(
        "metadata store: %s %s is not kept: %s", kind, ident, why
    )


def merge_kfp_runs(
    bind: sa.Connection,
    kfp_runs: list[dict[str, Any]],
    versions: Versions,
    experiment_ids: set[str],
) -> None:
    """Each `kfp_runs` row onto its run, or, for one no worker started, a run of its own.

    References 0007 left dangling are dropped: an experiment that is gone becomes none; a run
    that started keeps the version it ran when its uploaded version is gone; one that never
    started and has no version left is not kept (said in a warning)."""
    runs = sa.table(
        "runs",
        *(
            sa.column(n)
            for n in (
                "run_id",
                "pipeline_version_id",
                "state",
                "pipeline_root",
                "created_at",
                "finished_at",
                "engine_host",
                "engine_pid",
                "engine_started",
                "display_name",
                "description",
                "experiment_id",
                "namespace",
                "storage_state",
                "recurring_run_id",
                "scheduled_at",
                "starts",
            )
        ),
        sa.column("parameters", JSON),
        sa.column("outputs", JSON),
        sa.column("error", JSON),
    )
    known = {r[0]: r[1] for r in bind.execute(sa.text("SELECT run_id, state FROM runs"))}
    for row in kfp_runs:
        config = json_value(row["runtime_config"]) or {}
        shared = {
            "display_name": row["display_name"],
            "description": row["description"],
            "experiment_id": row["experiment_id"]
            if row["experiment_id"] in experiment_ids
            else None,
            "namespace": row["namespace"],
            "storage_state": row["storage_state"],
            "recurring_run_id": row["recurring_run_id"],
            "scheduled_at": row["scheduled_at"],
            "starts": row["starts"],
        }
        if json_value(row["pipeline_spec"]) is None and row["pipeline_version_id"] in versions.ids:
            shared["pipeline_version_id"] = row["pipeline_version_id"]  # the uploaded version
        state = known.get(row["run_id"])
        if state is not None:
            if row["state"] in ("CANCELED", "CANCELING") and state in ("INTERRUPTED", "RUNNING"):
                shared["state"] = "CANCELED"
                shared["finished_at"] = row["finished_at"] or time.time()
            bind.execute(runs.update().where(runs.c.run_id == row["run_id"]).values(**shared))
            continue
        spec = json_value(row["pipeline_spec"])
        if spec is not None:
            shared["pipeline_version_id"] = versions.implicit(ir_of(spec), row["created_at"])
        if "pipeline_version_id" not in shared:
            dropped("run", row["run_id"], "it never started and its pipeline version was deleted")
            continue
        error = {"error_type": "RunError", "message": row["error"]} if row["error"] else None
        bind.execute(
            runs.insert().values(
                run_id=row["run_id"],
                state=NEVER_STARTED.get(row["state"], "FAILED"),
                parameters=dict(config.get("parameters") or {}),
                pipeline_root=config.get("pipeline_root") or "",
                created_at=row["created_at"],
                finished_at=row["finished_at"],
                outputs={},
                error=error,
                engine_host="",
                engine_pid=0,
                engine_started="",
                **{**shared, "starts": 0},
            )
        )


def restore_0007_records(
    bind: sa.Connection,
    versions: list[dict[str, Any]],
    experiments: list[dict[str, Any]],
    named: list[dict[str, Any]],
    recurring: list[dict[str, Any]],
    runs: list[dict[str, Any]],
) -> None:
    """0007's KFP tables (made empty by its revision), filled from the records of 0008."""
    if experiments:
        op.bulk_insert(
            sa.table("kfp_experiments", *(sa.column(k) for k in experiments[0])), experiments
        )
    if named:
        op.bulk_insert(sa.table("kfp_pipelines", *(sa.column(k) for k in named[0])), named)
    spec_of = {v["pipeline_version_id"]: json_value(v["ir"]) for v in versions}
    uploaded = [
        {
            "pipeline_version_id": v["pipeline_version_id"],
            "pipeline_id": v["pipeline_id"],
            "display_name": v["display_name"],
            "description": v["description"],
            "pipeline_spec": spec_of[v["pipeline_version_id"]],
            "created_at": v["created_at"],
        }
        for v in versions
        if v["pipeline_id"] is not None
    ]
    if uploaded:
        plain = [k for k in uploaded[0] if k != "pipeline_spec"]
        op.bulk_insert(
            sa.table(
                "kfp_pipeline_versions",
                *(sa.column(k) for k in plain),
                sa.column("pipeline_spec", JSON),
            ),
            uploaded,
        )
    pipeline_of = {v["pipeline_version_id"]: v["pipeline_id"] for v in versions}
    kfp_runs = [
        {
            "run_id": r["run_id"],
            "experiment_id": r["experiment_id"] or "",
            "namespace": r["namespace"],
            "display_name": r["display_name"],
            "description": r["description"],
            "pipeline_spec": None
            if pipeline_of[r["pipeline_version_id"]]
            else spec_of[r["pipeline_version_id"]],
            "pipeline_id": pipeline_of[r["pipeline_version_id"]],
            "pipeline_version_id": r["pipeline_version_id"]
            if pipeline_of[r["pipeline_version_id"]]
            else None,
            "runtime_config": {
                "parameters": json_value(r["parameters"]) or {},
                "pipeline_root": r["pipeline_root"],
            },
            "storage_state": r["storage_state"],
            "state": {"QUEUED": "PENDING", "INTERRUPTED": "FAILED"}.get(r["state"], r["state"]),
            "error": (json_value(r["error"]) or {}).get("message") if r["error"] else None,
            "created_at": r["created_at"],
            "scheduled_at": r["scheduled_at"],
            "finished_at": r["finished_at"],
            "worker_host": None,
            "worker_pid": None,
            "starts": r["starts"],
            "recurring_run_id": r["recurring_run_id"],
        }
        for r in runs
        # The server's runs (`headwater run` names none, and never queues or cancels one).
        if r["starts"] or r["experiment_id"] or r["display_name"] or r["state"] in _SERVER_ONLY
    ]
    if kfp_runs:
        plain = [k for k in kfp_runs[0] if k not in ("pipeline_spec", "runtime_config")]
        op.bulk_insert(
            sa.table(
                "kfp_runs",
                *(sa.column(k) for k in plain),
                sa.column("pipeline_spec", JSON),
                sa.column("runtime_config", JSON),
            ),
            kfp_runs,
        )
    # 0007 kept a run the server never started in `kfp_runs` alone.
    started = {r[0] for r in bind.execute(sa.text("SELECT DISTINCT run_id FROM executions"))}
    never = [{"r": r["run_id"]} for r in kfp_runs if r["run_id"] not in started]
    if never:
        bind.execute(sa.text("DELETE FROM runs WHERE run_id = :r"), never)
    for row in recurring:
        version = row["pipeline_version_id"]
        uploaded_version = pipeline_of.get(version) is not None
        op.bulk_insert(
            sa.table(
                "kfp_recurring_runs",
                *(sa.column(k) for k in row if k not in ("runtime_config", "trigger")),
                sa.column("pipeline_spec", JSON),
                sa.column("pipeline_id"),
                sa.column("runtime_config", JSON),
                sa.column("trigger", JSON),
            ),
            [
                {
                    **row,
                    "experiment_id": row["experiment_id"] or "",
                    "runtime_config": json_value(row["runtime_config"]),
                    "trigger": json_value(row["trigger"]),
                    "pipeline_spec": None if uploaded_version else spec_of.get(version),
                    "pipeline_id": pipeline_of.get(version),
                    "pipeline_version_id": version if uploaded_version else None,
                }
            ],
        )
