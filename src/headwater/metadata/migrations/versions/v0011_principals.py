"""Who is who on a team server: the principals (personal tokens, proxy users) and the creator
of every run, experiment, pipeline, version and recurring run.

Revision ID: 0011_principals
Revises: 0010_execution_container
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_principals"
down_revision = "0010_execution_container"
branch_labels = None
depends_on = None

#: The tables that record who made each row (existing rows get NULL: no one was identified).
_CREATED = ("runs", "experiments", "pipelines", "pipeline_versions", "recurring_runs")


def upgrade() -> None:
    for table in _CREATED:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("created_by", sa.String(), nullable=True))
    op.create_table(
        "principals",
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("namespaces", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("kind", "name", name=op.f("pk_principals")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_principals_token_hash")),
    )


def downgrade() -> None:
    op.drop_table("principals")
    for table in _CREATED:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("created_by")
