"""Runs taken from a queue record their worker's last heartbeat: a lease another server may
take over when it lapses.

Revision ID: 0009_run_heartbeat
Revises: 0008_one_run_system
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_run_heartbeat"
down_revision = "0008_one_run_system"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: no worker of theirs ever beat (a lapsed lease, when held).
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("heartbeat_at", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("heartbeat_at")
