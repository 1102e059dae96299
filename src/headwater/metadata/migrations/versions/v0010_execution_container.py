"""Executions record the container they ran in: the runtime, the image and its id.

Revision ID: 0010_execution_container
Revises: 0009_run_lease
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_execution_container"
down_revision = "0009_run_lease"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: they ran on the host.
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("container", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("container")
