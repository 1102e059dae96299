"""Artifacts keep the stat signature their digest was taken with (when to trust the digest).

Revision ID: 0002_artifact_signature
Revises: 0001_initial
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_artifact_signature"
down_revision = "0001_initial"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Existing rows get NULL: no signature to trust, so the cache re-hashes them once.
    with op.batch_alter_table("artifacts") as batch:
        batch.add_column(sa.Column("signature", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("artifacts") as batch:
        batch.drop_column("signature")
