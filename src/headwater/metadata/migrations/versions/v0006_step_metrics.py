"""Step metrics: a metric over steps logged beside a Metrics artifact, one row per series.

Revision ID: 0006_step_metrics
Revises: 0005_endpoints
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_step_metrics"
down_revision = "0005_endpoints"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_metrics",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("execution_id", sa.Integer(), nullable=False),
        sa.Column("artifact_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("points", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("logged", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.run_id"],
            name=op.f("fk_step_metrics_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_step_metrics")),
    )
    op.create_index(op.f("ix_step_metrics_run_id"), "step_metrics", ["run_id"])


def downgrade() -> None:
    op.drop_table("step_metrics")
