"""Executions record the sandbox they ran in; namespaces get settings of their own (a pipeline
root and the secret holding its storage credentials).

Revision ID: 0012_sandboxes
Revises: 0011_principals
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_sandboxes"
down_revision = "0011_principals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: they ran without a sandbox.
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("sandbox", sa.JSON(none_as_null=True), nullable=True))
    op.create_table(
        "namespace_settings",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("pipeline_root", sa.String(), nullable=False),
        sa.Column("storage_secret", sa.String(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("updated_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_namespace_settings")),
    )


def downgrade() -> None:
    op.drop_table("namespace_settings")
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("sandbox")
