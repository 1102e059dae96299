"""Initial schema: pipelines, runs, executions, artifacts, events, metrics.

Revision ID: 0001_initial
Revises:
Create Date: 2026-09-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None

_json = sa.JSON(none_as_null=True)


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.String(), nullable=False),
        sa.Column("ir", _json, nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pipelines")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_pipelines_name_version")),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("pipeline_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("parameters", _json, nullable=False),
        sa.Column("pipeline_root", sa.String(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("outputs", _json, nullable=False),
        sa.Column("error", _json, nullable=True),
        sa.Column("engine_host", sa.String(), nullable=False),
        sa.Column("engine_pid", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["pipeline_id"], ["pipelines.id"], name=op.f("fk_runs_pipeline_id_pipelines")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_pipeline_id"), "runs", ["pipeline_id"])
    op.create_index(op.f("ix_runs_state"), "runs", ["state"])
    op.create_index(op.f("ix_runs_created_at"), "runs", ["created_at"])
    op.create_table(
        "executions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("task", sa.String(), nullable=False),
        sa.Column("component", sa.String(), nullable=False),
        sa.Column("parent_dag", sa.String(), nullable=False),
        sa.Column("iteration", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("inputs", _json, nullable=False),
        sa.Column("outputs", _json, nullable=False),
        sa.Column("cache_key", sa.String(), nullable=False),
        sa.Column("cached_from", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("log_path", sa.String(), nullable=False),
        sa.Column("error", _json, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.run_id"],
            name=op.f("fk_executions_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["cached_from"],
            ["executions.id"],
            name=op.f("fk_executions_cached_from_executions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_executions")),
        sa.UniqueConstraint("run_id", "task", name=op.f("uq_executions_run_id_task")),
    )
    op.create_index(op.f("ix_executions_cache_key"), "executions", ["cache_key"])
    op.create_index(op.f("ix_executions_cached_from"), "executions", ["cached_from"])
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uri", sa.String(), nullable=False),
        sa.Column("schema_title", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=True),
        sa.Column("metadata", _json, nullable=False),
        sa.Column("producer", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["producer"],
            ["executions.id"],
            name=op.f("fk_artifacts_producer_executions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifacts")),
        sa.UniqueConstraint("uri", name=op.f("uq_artifacts_uri")),
    )
    op.create_index(op.f("ix_artifacts_digest"), "artifacts", ["digest"])
    op.create_index(op.f("ix_artifacts_producer"), "artifacts", ["producer"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("slot", sa.String(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["executions.id"],
            name=op.f("fk_events_execution_id_executions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["artifact_id"],
            ["artifacts.id"],
            name=op.f("fk_events_artifact_id_artifacts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint(
            "execution_id",
            "artifact_id",
            "kind",
            "slot",
            "index",
            name=op.f("uq_events_execution_id_artifact_id_kind_slot_index"),
        ),
    )
    op.create_index("ix_events_artifact", "events", ["artifact_id", "kind", "execution_id"])
    op.create_index("ix_events_execution", "events", ["execution_id", "kind", "artifact_id"])
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.run_id"],
            name=op.f("fk_metrics_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metrics")),
    )
    op.create_index(op.f("ix_metrics_run_id"), "metrics", ["run_id"])


def downgrade() -> None:
    for table in ("metrics", "events", "artifacts", "executions", "runs", "pipelines"):
        op.drop_table(table)
