"""`headwater server`: KFP experiments, pipelines, versions, recurring runs, the run queue.

Revision ID: 0007_kfp_server
Revises: 0006_step_metrics
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_kfp_server"
down_revision = "0006_step_metrics"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kfp_experiments",
        sa.Column("experiment_id", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("storage_state", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_kfp_experiments")),
        sa.UniqueConstraint(
            "namespace", "display_name", name=op.f("uq_kfp_experiments_namespace_display_name")
        ),
    )
    op.create_table(
        "kfp_pipelines",
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("pipeline_id", name=op.f("pk_kfp_pipelines")),
        sa.UniqueConstraint(
            "namespace", "display_name", name=op.f("uq_kfp_pipelines_namespace_display_name")
        ),
    )
    op.create_table(
        "kfp_runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("experiment_id", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("pipeline_spec", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("pipeline_id", sa.String(), nullable=True),
        sa.Column("pipeline_version_id", sa.String(), nullable=True),
        sa.Column("runtime_config", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("storage_state", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("scheduled_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("worker_host", sa.String(), nullable=True),
        sa.Column("worker_pid", sa.Integer(), nullable=True),
        sa.Column("starts", sa.Integer(), nullable=False),
        sa.Column("recurring_run_id", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_kfp_runs")),
    )
    with op.batch_alter_table("kfp_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_kfp_runs_created_at"), ["created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_kfp_runs_experiment_id"), ["experiment_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_kfp_runs_namespace"), ["namespace"], unique=False)
        batch_op.create_index(batch_op.f("ix_kfp_runs_state"), ["state"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_kfp_runs_recurring_run_id"), ["recurring_run_id"], unique=False
        )

    op.create_table(
        "kfp_recurring_runs",
        sa.Column("recurring_run_id", sa.String(), nullable=False),
        sa.Column("experiment_id", sa.String(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("pipeline_spec", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("pipeline_id", sa.String(), nullable=True),
        sa.Column("pipeline_version_id", sa.String(), nullable=True),
        sa.Column("runtime_config", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("trigger", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("max_concurrency", sa.Integer(), nullable=False),
        sa.Column("no_catchup", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("next_fire_at", sa.Double(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("recurring_run_id", name=op.f("pk_kfp_recurring_runs")),
    )
    with op.batch_alter_table("kfp_recurring_runs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_kfp_recurring_runs_experiment_id"), ["experiment_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_kfp_recurring_runs_namespace"), ["namespace"], unique=False
        )

    op.create_table(
        "kfp_pipeline_versions",
        sa.Column("pipeline_version_id", sa.String(), nullable=False),
        sa.Column("pipeline_id", sa.String(), nullable=False),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("description", sa.String(), nullable=False),
        sa.Column("pipeline_spec", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pipeline_id"],
            ["kfp_pipelines.pipeline_id"],
            name=op.f("fk_kfp_pipeline_versions_pipeline_id_kfp_pipelines"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pipeline_version_id", name=op.f("pk_kfp_pipeline_versions")),
        sa.UniqueConstraint(
            "pipeline_id",
            "display_name",
            name=op.f("uq_kfp_pipeline_versions_pipeline_id_display_name"),
        ),
    )
    with op.batch_alter_table("kfp_pipeline_versions", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_kfp_pipeline_versions_pipeline_id"), ["pipeline_id"], unique=False
        )


def downgrade() -> None:
    op.drop_table("kfp_recurring_runs")
    with op.batch_alter_table("kfp_pipeline_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kfp_pipeline_versions_pipeline_id"))

    op.drop_table("kfp_pipeline_versions")
    with op.batch_alter_table("kfp_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_kfp_runs_state"))
        batch_op.drop_index(batch_op.f("ix_kfp_runs_recurring_run_id"))
        batch_op.drop_index(batch_op.f("ix_kfp_runs_namespace"))
        batch_op.drop_index(batch_op.f("ix_kfp_runs_experiment_id"))
        batch_op.drop_index(batch_op.f("ix_kfp_runs_created_at"))

    op.drop_table("kfp_runs")
    op.drop_table("kfp_pipelines")
    op.drop_table("kfp_experiments")
