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

import uuid
from typing import Any

import sqlalchemy as sa
from alembic import op

from headwater.metadata.encoding import ir_digest
from headwater.metadata.migrations.moves import (
    Versions,
    dropped,
    ir_name,
    ir_of,
    json_value,
    merge_kfp_runs,
    restore_0007_records,
    rows_of,
)

revision = "0008_one_run_system"
down_revision = "0007_kfp_server"
branch_labels = None
depends_on = None

_JSON = sa.JSON(none_as_null=True)


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


def upgrade() -> None:
    bind = op.get_bind()
    old_pipelines = rows_of(bind, "pipelines")
    experiments = rows_of(bind, "kfp_experiments")
    named = rows_of(bind, "kfp_pipelines")
    uploaded = rows_of(bind, "kfp_pipeline_versions")
    kfp_runs = rows_of(bind, "kfp_runs")
    recurring = rows_of(bind, "kfp_recurring_runs")
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
    versions = Versions(bind)
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
                "ir": json_value(row["ir"]),
                "created_at": row["created_at"],
            }
        )
    # 0007 had no foreign keys: a deleted pipeline, version or experiment could leave rows
    # naming it. Those references are dropped here, never carried into the new keys.
    named_ids = {row["pipeline_id"] for row in named}
    experiment_ids = {row["experiment_id"] for row in experiments}
    for row in uploaded:
        ir = ir_of(json_value(row["pipeline_spec"]))
        versions.add(
            {
                "pipeline_version_id": row["pipeline_version_id"],
                # A version whose pipeline was deleted stays, detached, as a deleted version's
                # runs keep theirs (see `delete_pipeline`).
                "pipeline_id": row["pipeline_id"] if row["pipeline_id"] in named_ids else None,
                "name": ir_name(ir),
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
    merge_kfp_runs(bind, kfp_runs, versions, experiment_ids)

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
    op.create_index(
        "uq_pipeline_versions_unuploaded",
        "pipeline_versions",
        ["name", "digest"],
        unique=True,
        sqlite_where=sa.text("pipeline_id IS NULL"),
        postgresql_where=sa.text("pipeline_id IS NULL"),
    )

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
        spec = json_value(row["pipeline_spec"])
        version = (
            row["pipeline_version_id"]
            if spec is None
            else versions.implicit(ir_of(spec), row["created_at"])
        )
        if version not in versions.ids:  # its version was deleted: it could never fire
            dropped("recurring run", row["recurring_run_id"], "its pipeline version was deleted")
            continue
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
                experiment_id=row["experiment_id"]
                if row["experiment_id"] in experiment_ids
                else None,
                runtime_config=json_value(row["runtime_config"]),
                trigger=json_value(row["trigger"]),
                pipeline_version_id=version,
            )
        )


def downgrade() -> None:
    """Back to 0007's tables. What 0007 cannot hold is dropped: the KFP view of runs that
    `headwater run` made, and unuploaded versions nothing refers to any more."""
    bind = op.get_bind()
    versions = rows_of(bind, "pipeline_versions")
    experiments = rows_of(bind, "experiments")
    named = rows_of(bind, "pipelines")
    recurring = rows_of(bind, "recurring_runs")
    runs = rows_of(bind, "runs")
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
                    "ir": json_value(row["ir"]),
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
    restore_0007_records(bind, versions, experiments, named, recurring, runs)
