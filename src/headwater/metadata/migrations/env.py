"""Alembic environment: migrates the connection `headwater.metadata.migrations` hands over.

Run through `headwater.metadata.migrations.upgrade` (no alembic.ini needed). A developer
writing a new revision can instead set `sqlalchemy.url` on the config returned by
`headwater.metadata.migrations.alembic_config` and call `alembic.command.revision`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from headwater.metadata.schema import METADATA


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=METADATA,
        render_as_batch=True,  # SQLite rebuilds tables for most ALTERs
    )
    with context.begin_transaction():
        context.run_migrations()


_given = context.config.attributes.get("connection")
if isinstance(_given, Connection):
    _run(_given)
else:
    _engine = create_engine(context.config.get_main_option("sqlalchemy.url", "sqlite://"))
    with _engine.begin() as _conn:
        _run(_conn)
    _engine.dispose()
