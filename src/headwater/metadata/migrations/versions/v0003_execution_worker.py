"""Executions record which executor ran them, and which of its workers.

Revision ID: 0003_execution_worker
Revises: 0002_artifact_signature
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_execution_worker"
down_revision = "0002_artifact_signature"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: they ran before the store knew (on the local executor).
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("executor", sa.String(), nullable=True))
        batch.add_column(sa.Column("worker", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("worker")
        batch.drop_column("executor")
