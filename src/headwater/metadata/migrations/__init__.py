"""Schema migrations: bring a metadata database to the newest revision when a store opens.

Alembic is driven from code, without an alembic.ini: `alembic_config` points
`script_location` at this package. `upgrade` is cheap when the database is current (two
reads) and safe when several processes open a new database at once: they take turns, behind
a file lock next to a SQLite database or `pg_advisory_lock` on PostgreSQL.

To add a revision: change `headwater.metadata.schema`, then::

    cfg = alembic_config()
    cfg.set_main_option("sqlalchemy.url", "sqlite:////tmp/current.db")  # at the old head
    alembic.command.revision(cfg, "what changed", autogenerate=True, rev_id="0002_...")

review the generated file (name it `vNNNN_<slug>.py`) and set `SCHEMA_HEAD` in
`headwater.metadata.base` (`HEAD` below is that).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from headwater.metadata.base import SCHEMA_HEAD

if TYPE_CHECKING:
    from collections.abc import Iterator

    from alembic.config import Config
    from sqlalchemy import Connection, Engine

#: The newest revision; a test checks it is the head of `versions/`.
HEAD = SCHEMA_HEAD

_HERE = Path(__file__).resolve().parent
# pg_advisory_lock key: any constant shared by every Headwater process ("hwmd" in ASCII).
_PG_LOCK_KEY = 0x68776D64


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for our revisions, migrating `connection` when one is given."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.set_main_option("path_separator", "os")
    cfg.attributes["connection"] = connection
    return cfg


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for a database without our tables."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine, *, lock_path: Path | None = None) -> None:
    """Migrate the database behind `engine` to `HEAD`, one process at a time.

    Args:
        engine: The engine to migrate through (its transactions must be able to write).
        lock_path: A file to `flock` while migrating (SQLite files); None for none.

    Raises:
        alembic.util.CommandError: The database is at a revision this Headwater does not
            know (made by a newer version).
    """
    with engine.connect() as conn:
        if current_revision(conn) == HEAD:
            return
    with _file_lock(lock_path), engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
            conn.commit()
        try:
            _upgrade_on(conn)
        finally:
            if engine.dialect.name == "postgresql":
                conn.rollback()
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
                conn.commit()


def _upgrade_on(conn: Connection) -> None:
    # A revision may rebuild a table that others refer to (SQLite's only way to change most
    # of a table): with foreign keys on, dropping the old copy would delete or refuse the rows
    # that refer to it. SQLite's own recipe turns them off around the change and checks them
    # after; the pragma takes effect only outside a transaction, so it goes to the driver's
    # connection directly (SQLAlchemy would begin one first).
    raw = conn.connection.dbapi_connection if conn.dialect.name == "sqlite" else None
    if raw is not None:
        raw.execute("PRAGMA foreign_keys = OFF")
    try:
        _migrate(conn)
    finally:
        if raw is not None:
            raw.execute("PRAGMA foreign_keys = ON")
    if raw is not None:
        broken = raw.execute("PRAGMA foreign_key_check").fetchall()
        if broken:  # said once, the data is left as it is
            logging.getLogger(__name__).warning(
                "metadata store: %d rows refer to records that do not exist (first: %s)",
                len(broken),
                broken[0],
            )


def _migrate(conn: Connection) -> None:
    with conn.begin():
        if current_revision(conn) is None and not inspect(conn).get_table_names():
            # A new database: create the head schema directly and stamp it, as Alembic's
            # "create_all, then stamp head" recipe does; importing Alembic and replaying every
            # revision would cost a new user's first command ~0.3 s.
            from headwater.metadata.schema import METADATA

            METADATA.create_all(conn)
            conn.execute(
                text(
                    "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                    "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
                )
            )
            conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": HEAD})
            return
        from alembic import command

        command.upgrade(alembic_config(conn), "head")


@contextlib.contextmanager
def _file_lock(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    try:
        import fcntl
    except ImportError:  # Windows: SQLite's own write lock still serializes the migration
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
