"""One run system: the server's runs, experiments, pipelines and recurring runs are the store's own.

`kfp_runs` merges into `runs` (a queued run is a run from the moment it is accepted);
`kfp_pipeline_versions` and the old `pipelines` (one row per IR) become `pipeline_versions`,
which runs point to by a string id; `kfp_pipelines`, `kfp_experiments` and
`kfp_recurring_runs` become `pipelines`, `experiments` and `recurring_runs`. Run ids, experiment
ids, pipeline ids and uploaded version ids are kept, so links and clients that hold them go on
working.

Revision ID: 0008_one_run_system
Revises: 0007_kfp_server
Create Date: 2026-12-06
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from alembic import op

from headwater.metadata.encoding import ir_digest

revision = "0008_one_run_system"
down_revision = "0007_kfp_server"
branch_labels = None
depends_on = None

#: KFP run states of `kfp_runs` -> the run's state, for runs no worker had started.
_NEVER_STARTED = {
    "PENDING": "QUEUED",
    "RUNNING": "QUEUED",  # claimed by a server that died before its worker recorded it
    "CANCELING": "CANCELED",
    "CANCELED": "CANCELED",
    "FAILED": "FAILED",
    "SUCCEEDED": "SUCCEEDED",
    "SKIPPED": "SUCCEEDED",
}
_JSON = sa.JSON(none_as_null=True)


def _json(value: Any) -> Any:
    """A JSON column's value: SQLite's driver gives text, PostgreSQL's the parsed value."""
    return json.loads(value) if isinstance(value, str) else value


def _rows(bind: sa.Connection, table: str) -> list[dict[str, Any]]:
    if not sa.inspect(bind).has_table(table):
        return []
    return [dict(r._mapping) for r in bind.execute(sa.text(f"SELECT * FROM {table}"))]


def _ir_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A stored KFP spec (the IR, or `{pipeline_spec, platform_spec}`) as the IR document a
    run keeps: the platform spec's `platforms` inside it, as `spec.ir.parse_pipeline` keeps it."""
    if "root" not in spec and isinstance(spec.get("pipeline_spec"), Mapping):
        platform = spec.get("platform_spec")
        platforms = platform.get("platforms", platform) if isinstance(platform, Mapping) else None
        doc = dict(spec["pipeline_spec"])
        return {**doc, "platforms": dict(platforms)} if platforms else doc
    return dict(spec)


def _ir_name(ir: Mapping[str, Any]) -> str:
    info = ir.get("pipelineInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) and name else "pipeline"


def _versions_table() -> list[Any]:
    return [
        sa.Column("pipeline_version_id", sa.String(), nullable=False),
        sa.Column("pipeline_id", sa.String(), nullable=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("ir", _JSON, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pipeline_version_id", name=op.f("pk_pipeline_versions")),
        sa.UniqueConstraint(
            "pipeline_id",
            "display_name",
            name=op.f("uq_pipeline_versions_pipeline_id_display_name"),
        ),
    ]


class _Versions:
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
            sa.column("ir", _JSON),
            sa.column("created_at"),
        )
        self._implicit: dict[tuple[str, str], str] = {}

    def add(self, row: dict[str, Any]) -> str:
        self.bind.execute(self.table.insert().values(**row))
        if row["pipeline_id"] is None:
            self._implicit[(row["name"], row["digest"])] = row["pipeline_version_id"]
        return str(row["pipeline_version_id"])

    def implicit(self, ir: dict[str, Any], created_at: float) -> str:
        name, digest = _ir_name(ir), ir_digest(ir)
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


def upgrade() -> None:
    bind = op.get_bind()
    old_pipelines = _rows(bind, "pipelines")
    experiments = _rows(bind, "kfp_experiments")
    named = _rows(bind, "kfp_pipelines")
    uploaded = _rows(bind, "kfp_pipeline_versions")
    kfp_runs = _rows(bind, "kfp_runs")
    recurring = _rows(bind, "kfp_recurring_runs")
    for table in (
        "kfp_pipeline_versions",
        "kfp_pipelines",
        "kfp_runs",
        "kfp_recurring_runs",
        "kfp_experiments",
    ):
        op.drop_table(table)

    op.create_table(
        "experiments",
        sa.Column("experiment_id", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("storage_state", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_experiments")),
        sa.UniqueConstraint(
            "namespace", "display_name", name=op.f("uq_experiments_namespace_display_name")
        ),
    )
    if experiments:
        op.bulk_insert(
            sa.table("experiments", *(sa.column(k) for k in experiments[0])), experiments
        )

    # Versions: every IR a run recorded, and every uploaded version (its id kept).
    op.create_table("pipeline_versions", *_versions_table())
    versions = _Versions(bind)
    by_old_id: dict[int, str] = {}
    for row in old_pipelines:
        by_old_id[row["id"]] = versions.add(
            {
                "pipeline_version_id": str(uuid.uuid4()),
                "pipeline_id": None,
                "name": row["name"],
                "digest": row["version"],
                "display_name": "",
                "description": "",
                "ir": _json(row["ir"]),
                "created_at": row["created_at"],
            }
        )
    for row in uploaded:
        ir = _ir_of(_json(row["pipeline_spec"]))
        versions.add(
            {
                "pipeline_version_id": row["pipeline_version_id"],
                "pipeline_id": row["pipeline_id"],
                "name": _ir_name(ir),
                "digest": ir_digest(ir),
                "display_name": row["display_name"],
                "description": row["description"],
                "ir": ir,
                "created_at": row["created_at"],
            }
        )

    # Runs: what KFP's API adds, and a string reference to their version.
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("pipeline_version_id", sa.String(), nullable=True))
        for name, default in (
            ("engine_started", ""),
            ("display_name", ""),
            ("description", ""),
            ("namespace", ""),
            ("storage_state", "AVAILABLE"),
        ):
            batch.add_column(sa.Column(name, sa.String(), nullable=False, server_default=default))
        batch.add_column(sa.Column("experiment_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("recurring_run_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("scheduled_at", sa.Double(), nullable=True))
        batch.add_column(sa.Column("starts", sa.Integer(), nullable=False, server_default="0"))
    if by_old_id:
        bind.execute(
            sa.text("UPDATE runs SET pipeline_version_id = :v WHERE pipeline_id = :i"),
            [{"v": v, "i": i} for i, v in by_old_id.items()],
        )

    op.drop_index(op.f("ix_runs_pipeline_id"), table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("pipeline_id")
        batch.alter_column("pipeline_version_id", existing_type=sa.String(), nullable=False)
        for name in ("engine_started", "display_name", "description", "namespace"):
            batch.alter_column(name, existing_type=sa.String(), server_default=None)
        batch.alter_column("storage_state", existing_type=sa.String(), server_default=None)
        batch.alter_column("starts", existing_type=sa.Integer(), server_default=None)
        batch.create_foreign_key(
            batch.f("fk_runs_pipeline_version_id_pipeline_versions"),
            "pipeline_versions",
            ["pipeline_version_id"],
            ["pipeline_version_id"],
        )
        batch.create_foreign_key(
            batch.f("fk_runs_experiment_id_experiments"),
            "experiments",
            ["experiment_id"],
            ["experiment_id"],
            ondelete="SET NULL",
        )
        for column in (
            "pipeline_version_id",
            "experiment_id",
            "namespace",
            "recurring_run_id",
        ):
            batch.create_index(batch.f(f"ix_runs_{column}"), [column], unique=False)
    op.drop_table("pipelines")
    _merge_kfp_runs(bind, kfp_runs, versions)

    op.create_table(
        "pipelines",
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pipeline_id", name=op.f("pk_pipelines")),
        sa.UniqueConstraint(
            "namespace", "display_name", name=op.f("uq_pipelines_namespace_display_name")
        ),
    )
    if named:
        op.bulk_insert(sa.table("pipelines", *(sa.column(k) for k in named[0])), named)
    with op.batch_alter_table("pipeline_versions") as batch:
        batch.create_foreign_key(
            batch.f("fk_pipeline_versions_pipeline_id_pipelines"),
            "pipelines",
            ["pipeline_id"],
            ["pipeline_id"],
        )
        batch.create_index(batch.f("ix_pipeline_versions_pipeline_id"), ["pipeline_id"])
        batch.create_index("ix_pipeline_versions_name_digest", ["name", "digest"])

    op.create_table(
        "recurring_runs",
        sa.Column("recurring_run_id", sa.String(), nullable=False),
        sa.Column("experiment_id", sa.String(), nullable=True),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("pipeline_version_id", sa.String(), nullable=False),
        sa.Column("runtime_config", _JSON, nullable=False),
        sa.Column("trigger", _JSON, nullable=False),
        sa.Column("max_concurrency", sa.Integer(), nullable=False),
        sa.Column("no_catchup", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("next_fire_at", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.experiment_id"],
            name=op.f("fk_recurring_runs_experiment_id_experiments"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["pipeline_version_id"],
            ["pipeline_versions.pipeline_version_id"],
            name=op.f("fk_recurring_runs_pipeline_version_id_pipeline_versions"),
        ),
        sa.PrimaryKeyConstraint("recurring_run_id", name=op.f("pk_recurring_runs")),
    )
    with op.batch_alter_table("recurring_runs") as batch:
        for column in ("experiment_id", "namespace", "pipeline_version_id"):
            batch.create_index(batch.f(f"ix_recurring_runs_{column}"), [column], unique=False)
    for row in recurring:
        spec = _json(row["pipeline_spec"])
        version = (
            row["pipeline_version_id"]
            if spec is None
            else versions.implicit(_ir_of(spec), row["created_at"])
        )
        plain = (
            "pipeline_spec",
            "pipeline_id",
            "pipeline_version_id",
            "runtime_config",
            "trigger",
            "experiment_id",
        )
        bind.execute(
            sa.table(
                "recurring_runs",
                *(sa.column(k) for k in row if k not in plain),
                sa.column("pipeline_version_id"),
                sa.column("experiment_id"),
                sa.column("runtime_config", _JSON),
                sa.column("trigger", _JSON),
            )
            .insert()
            .values(
                **{k: v for k, v in row.items() if k not in plain},
                experiment_id=row["experiment_id"] or None,
                runtime_config=_json(row["runtime_config"]),
                trigger=_json(row["trigger"]),
                pipeline_version_id=version,
            )
        )


def _merge_kfp_runs(
    bind: sa.Connection, kfp_runs: list[dict[str, Any]], versions: _Versions
) -> None:
    """Each `kfp_runs` row onto its run, or, for one no worker started, a run of its own."""
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
        sa.column("parameters", _JSON),
        sa.column("outputs", _JSON),
        sa.column("error", _JSON),
    )
    known = {r[0]: r[1] for r in bind.execute(sa.text("SELECT run_id, state FROM runs"))}
    for row in kfp_runs:
        config = _json(row["runtime_config"]) or {}
        shared = {
            "display_name": row["display_name"],
            "description": row["description"],
            "experiment_id": row["experiment_id"] or None,
            "namespace": row["namespace"],
            "storage_state": row["storage_state"],
            "recurring_run_id": row["recurring_run_id"],
            "scheduled_at": row["scheduled_at"],
            "starts": row["starts"],
        }
        if _json(row["pipeline_spec"]) is None and row["pipeline_version_id"]:
            shared["pipeline_version_id"] = row["pipeline_version_id"]  # the uploaded version
        state = known.get(row["run_id"])
        if state is not None:
            if row["state"] in ("CANCELED", "CANCELING") and state in ("INTERRUPTED", "RUNNING"):
                shared["state"] = "CANCELED"
                shared["finished_at"] = row["finished_at"] or time.time()
            bind.execute(runs.update().where(runs.c.run_id == row["run_id"]).values(**shared))
            continue
        spec = _json(row["pipeline_spec"])
        if spec is not None:
            shared["pipeline_version_id"] = versions.implicit(_ir_of(spec), row["created_at"])
        error = {"error_type": "RunError", "message": row["error"]} if row["error"] else None
        bind.execute(
            runs.insert().values(
                run_id=row["run_id"],
                state=_NEVER_STARTED.get(row["state"], "FAILED"),
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


def downgrade() -> None:
    """Back to 0007's tables. What 0007 cannot hold is dropped: the KFP view of runs that
    `headwater run` made, and unuploaded versions nothing refers to any more."""
    bind = op.get_bind()
    versions = _rows(bind, "pipeline_versions")
    experiments = _rows(bind, "experiments")
    named = _rows(bind, "pipelines")
    recurring = _rows(bind, "recurring_runs")
    runs = _rows(bind, "runs")
    op.drop_table("recurring_runs")

    # One integer-keyed `pipelines` row per (name, digest), as 0007 kept them.
    ints: dict[tuple[str, str], int] = {}
    by_version: dict[str, int] = {}
    for row in versions:
        key = (row["name"], row["digest"])
        by_version[row["pipeline_version_id"]] = ints.setdefault(key, len(ints) + 1)
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("pipeline_id", sa.Integer(), nullable=True))
    if by_version:
        bind.execute(
            sa.text("UPDATE runs SET pipeline_id = :i WHERE pipeline_version_id = :v"),
            [{"i": i, "v": v} for v, i in by_version.items()],
        )
    with op.batch_alter_table("runs") as batch:
        for column in ("pipeline_version_id", "experiment_id", "namespace", "recurring_run_id"):
            batch.drop_index(batch.f(f"ix_runs_{column}"))
        batch.drop_constraint(
            batch.f("fk_runs_pipeline_version_id_pipeline_versions"), type_="foreignkey"
        )
        batch.drop_constraint(batch.f("fk_runs_experiment_id_experiments"), type_="foreignkey")
        for column in (
            "pipeline_version_id",
            "engine_started",
            "display_name",
            "description",
            "experiment_id",
            "namespace",
            "storage_state",
            "recurring_run_id",
            "scheduled_at",
            "starts",
        ):
            batch.drop_column(column)
        batch.alter_column("pipeline_id", existing_type=sa.Integer(), nullable=False)
    op.drop_table("pipeline_versions")
    op.drop_table("pipelines")
    op.drop_table("experiments")
    op.create_table(
        "pipelines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("ir", _JSON, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipelines")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_pipelines_name_version")),
    )
    seen: set[int] = set()
    rows = []
    for row in versions:
        i = by_version[row["pipeline_version_id"]]
        if i not in seen:
            seen.add(i)
            rows.append(
                {
                    "id": i,
                    "name": row["name"],
                    "version": row["digest"],
                    "ir": _json(row["ir"]),
                    "created_at": row["created_at"],
                }
            )
    if rows:
        op.bulk_insert(
            sa.table("pipelines", *(sa.column(k) for k in ("id", "name", "version", "created_at")),
                     sa.column("ir", _JSON)),
            rows,
        )  # fmt: skip
    with op.batch_alter_table("runs") as batch:
        batch.create_foreign_key(
            batch.f("fk_runs_pipeline_id_pipelines"), "pipelines", ["pipeline_id"], ["id"]
        )
        batch.create_index(batch.f("ix_runs_pipeline_id"), ["pipeline_id"], unique=False)

    from headwater.metadata.migrations.versions import v0007_kfp_server

    v0007_kfp_server.upgrade()
    if experiments:
        op.bulk_insert(
            sa.table("kfp_experiments", *(sa.column(k) for k in experiments[0])), experiments
        )
    if named:
        op.bulk_insert(sa.table("kfp_pipelines", *(sa.column(k) for k in named[0])), named)
    spec_of = {v["pipeline_version_id"]: _json(v["ir"]) for v in versions}
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
                sa.column("pipeline_spec", _JSON),
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
                "parameters": _json(r["parameters"]) or {},
                "pipeline_root": r["pipeline_root"],
            },
            "storage_state": r["storage_state"],
            "state": {"QUEUED": "PENDING", "INTERRUPTED": "FAILED"}.get(r["state"], r["state"]),
            "error": (_json(r["error"]) or {}).get("message") if r["error"] else None,
            "created_at": r["created_at"],
            "scheduled_at": r["scheduled_at"],
            "finished_at": r["finished_at"],
            "worker_host": None,
            "worker_pid": None,
            "starts": r["starts"],
            "recurring_run_id": r["recurring_run_id"],
        }
        for r in runs
        if r["starts"] or r["experiment_id"]
    ]
    if kfp_runs:
        plain = [k for k in kfp_runs[0] if k not in ("pipeline_spec", "runtime_config")]
        op.bulk_insert(
            sa.table(
                "kfp_runs",
                *(sa.column(k) for k in plain),
                sa.column("pipeline_spec", _JSON),
                sa.column("runtime_config", _JSON),
            ),
            kfp_runs,
        )
    op.execute(sa.text("DELETE FROM runs WHERE state = 'QUEUED'"))
    for row in recurring:
        version = row["pipeline_version_id"]
        uploaded_version = pipeline_of.get(version) is not None
        op.bulk_insert(
            sa.table(
                "kfp_recurring_runs",
                *(sa.column(k) for k in row if k not in ("runtime_config", "trigger")),
                sa.column("pipeline_spec", _JSON),
                sa.column("pipeline_id"),
                sa.column("runtime_config", _JSON),
                sa.column("trigger", _JSON),
            ),
            [
                {
                    **row,
                    "experiment_id": row["experiment_id"] or "",
                    "runtime_config": _json(row["runtime_config"]),
                    "trigger": _json(row["trigger"]),
                    "pipeline_spec": None if uploaded_version else spec_of.get(version),
                    "pipeline_id": pipeline_of.get(version),
                    "pipeline_version_id": version if uploaded_version else None,
                }
            ],
        )
