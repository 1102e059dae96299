"""Endpoints: the model servers `deploy_model` started, by name.

Revision ID: 0005_endpoints
Revises: 0004_models
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_endpoints"
down_revision = "0004_models"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started", sa.String(), nullable=False),
        sa.Column("models", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("config", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("log_path", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("task", sa.String(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        # SET NULL: deleting a run keeps the record of the server it started.
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_endpoints_run_id_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_endpoints")),
    )
    op.create_index(op.f("ix_endpoints_run_id"), "endpoints", ["run_id"])


def downgrade() -> None:
    op.drop_table("endpoints")
