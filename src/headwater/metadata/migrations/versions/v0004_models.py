"""The model registry: named, versioned models with their URI, metrics, stage and producer.

Revision ID: 0004_models
Revises: 0003_execution_worker
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_models"
down_revision = "0003_execution_worker"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("uri", sa.String(), nullable=False),
        sa.Column("framework", sa.String(), nullable=False),
        sa.Column("metrics", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("execution_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("stage_changed_at", sa.Double(), nullable=False),
        # SET NULL: deleting a run keeps the models it registered (without their producer).
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_models_run_id_runs"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["executions.id"],
            name=op.f("fk_models_execution_id_executions"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_models")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_models_name_version")),
    )
    op.create_index(op.f("ix_models_uri"), "models", ["uri"])
    op.create_index(op.f("ix_models_run_id"), "models", ["run_id"])
    op.create_index(op.f("ix_models_execution_id"), "models", ["execution_id"])


def downgrade() -> None:
    op.drop_table("models")
