"""Runs taken from a queue carry their worker's lease: the time it expires unless renewed,
after which another server may take the run over.

Revision ID: 0009_run_lease
Revises: 0008_one_run_system
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_run_lease"
down_revision = "0008_one_run_system"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: no queue worker of theirs holds a lease.
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("lease_until", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("lease_until")
