"""Opening a metadata database: URL checks, engines, migration, transactions.

`Database` is what `SqlMetadataStore` stands on. Opening one validates the URL (every
failure is a one-line `StorageError` that hides the password), creates the engine, and
migrates the schema to the newest revision (see `migrations`). A SQLite connection gets the
settings in `sqlite` (WAL, a 30 s busy timeout, `BEGIN IMMEDIATE` for writes, so concurrent
writers queue instead of failing); a write still locked is retried a few times.

Opened `read_only`, a database is neither created nor migrated: a SQLite file is opened
with `mode=ro`, and a schema other than the newest is refused in one line (reading commands
must not change what they read).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, create_engine, event, make_url
from sqlalchemy.exc import (
    ArgumentError,
    IntegrityError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.pool import StaticPool

from headwater.errors import HeadwaterSystemError, NotFoundError, StorageError
from headwater.metadata import migrations, sqlite
from headwater.metadata.encoding import json_column

T = TypeVar("T")
_URL_HELP = (
    "use 'sqlite:////absolute/path/metadata.db' or "
    "'postgresql+psycopg://user:password@host:5432/database' (set HEADWATER_METADATA_URL)"
)


class Database:
    """An open metadata database, migrated to the newest schema (unless `read_only`).

    Args:
        url: A SQLAlchemy URL (see `SqlMetadataStore`).
        read_only: Open without creating, migrating or writing anything: a SQLite file must
            exist and is opened with `mode=ro`; the schema must be the newest.

    Raises:
        StorageError: The URL is malformed, names an unknown database or a missing driver,
            or the database cannot be reached or was made by a newer Headwater; read-only,
            also a schema older than the newest, or tables that are not Headwater's.
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        #: The URL with its password masked, for messages.
        self.url = mask_url(url)
        #: False only for a read-only database with no tables at all (nothing recorded yet).
        self.has_schema = True
        self.engine, sqlite_path = _make_engine(url, self.url, read_only=read_only)
        self._writer = self.engine.execution_options(headwater_write=True)
        # One shared in-memory connection must not be used by two threads at once.
        self._local = threading.local()
        self._serial: threading.RLock | None = None
        if isinstance(self.engine.pool, StaticPool):
            self._serial = threading.RLock()
        lock = None if sqlite_path is None else sqlite_path.with_name(sqlite_path.name + ".lock")
        try:
            if read_only:
                self.has_schema = _check_schema(self.engine, self.url)
            else:
                migrations.upgrade(self._writer, lock_path=lock)
        except Exception as exc:
            self.engine.dispose()
            raise _open_error(self.url, exc) from exc

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Run every `transaction()` of this thread inside one write transaction.

        One commit instead of one per call: the engine's recorder writes a task's execution,
        artifacts, events and metrics (and often several tasks) this way.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self._serial or contextlib.nullcontext(), self._writer.begin() as conn:
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def transaction(
        self, fn: Callable[[Connection], T], *, write: bool = False, refers_to: str = ""
    ) -> T:
        """Run `fn` in one transaction and return its result.

        Writes that find the database locked, or that lose an insert race (a unique key
        taken meanwhile by another process), are retried.

        Args:
            fn: The work, given the transaction's connection.
            write: Start a write transaction (`BEGIN IMMEDIATE` on SQLite).
            refers_to: What a constraint still violated after the retries refers to (a
                missing record), for the NotFoundError; empty to re-raise the IntegrityError.

        Raises:
            StorageError: The database failed, or stayed locked through every attempt.
            NotFoundError: A reference to `refers_to` failed.
        """
        joined = getattr(self._local, "conn", None)
        if joined is not None:  # inside batch(): one transaction for many writes
            return fn(joined)
        engine = self._writer if write else self.engine
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._serial or contextlib.nullcontext(), engine.begin() as conn:
                    return fn(conn)
            except OperationalError as exc:
                if write and sqlite.is_locked(str(exc.orig)) and attempt < sqlite.WRITE_ATTEMPTS:
                    time.sleep(sqlite.retry_delay(attempt))
                    continue
                raise StorageError(
                    f"metadata store {self.url!r} failed: {first_line(exc)}: "
                    "check that the database is reachable and not locked by another program"
                ) from exc
            except IntegrityError as exc:
                if write and attempt < 2:
                    continue
                if not refers_to:
                    # A unique key still taken after the retry: a record written twice (a
                    # bug, or two engines racing), not something the user can fix.
                    raise HeadwaterSystemError(
                        f"metadata store {self.url!r} refused a write: {first_line(exc)}"
                    ) from exc
                raise NotFoundError(
                    f"{refers_to} is not in the metadata store {self.url!r} "
                    f"({first_line(exc)}): record it first"
                ) from exc

    def dispose(self) -> None:
        """Close pooled connections; a file or server database reconnects when used again."""
        self.engine.dispose()


def mask_url(url: str) -> str:
    """`url` with any password replaced by ***, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(//[^/:@]*:)[^/@]*@", r"\1***@", url)


def sqlite_file(url: str) -> Path | None:
    """The database file a `sqlite:///...` URL names; None for other or in-memory URLs."""
    try:
        return _sqlite_path(make_url(url))
    except (ArgumentError, ValueError):
        return None


def first_line(exc: BaseException) -> str:
    """The first line of a (driver) error's message, whitespace collapsed."""
    inner = getattr(exc, "orig", None) or exc
    lines = str(inner).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(inner).__name__


def _make_engine(url: str, masked: str, *, read_only: bool) -> tuple[Engine, Path | None]:
    """An engine for `url` and, for a SQLite file, its path (None otherwise)."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:
        raise StorageError(
            f"metadata store URL {masked!r} is not a SQLAlchemy URL: {_URL_HELP}"
        ) from exc
    parsed = _with_driver(parsed)
    kwargs: dict[str, Any] = {"json_serializer": json_column}
    sqlite_path = _sqlite_path(parsed)
    if sqlite_path is not None:
        if not sqlite_path.parent.is_dir():
            raise StorageError(
                f"metadata store URL {masked!r}: directory {str(sqlite_path.parent)!r} "
                "does not exist: create it, or point the URL at an existing directory"
            )
        if read_only:
            if not sqlite_path.is_file():
                raise StorageError(
                    f"no metadata store at {str(sqlite_path)!r} (from URL {masked!r}): check "
                    "the path; a store is created by the first `headwater run` that uses it"
                )
            kwargs["creator"] = _read_only_sqlite(sqlite_path)
        parsed = parsed.set(database=str(sqlite_path))
    in_memory = _sqlite_in_memory(parsed)
    if in_memory:
        kwargs["poolclass"] = StaticPool
        kwargs["connect_args"] = {"check_same_thread": False}
    elif parsed.get_backend_name() == "postgresql":
        kwargs["pool_pre_ping"] = True
        if parsed.get_driver_name() == "psycopg" and "connect_timeout" not in parsed.query:
            kwargs["connect_args"] = {"connect_timeout": 10}
    try:
        engine = create_engine(parsed, **kwargs)
    except NoSuchModuleError as exc:
        raise StorageError(
            f"metadata store URL {masked!r}: unknown database "
            f"{parsed.drivername!r} (known: sqlite, postgresql): {_URL_HELP}"
        ) from exc
    except ImportError as exc:
        extra = (
            "pip install 'headwater[postgres]'"
            if parsed.get_backend_name() == "postgresql"
            else "install it, or use SQLite or PostgreSQL"
        )
        raise StorageError(
            f"metadata store URL {masked!r} needs the database driver {exc.name!r}, "
            f"which is not installed: {extra}"
        ) from exc
    except (ArgumentError, TypeError, ValueError) as exc:
        raise StorageError(
            f"metadata store URL {masked!r}: {first_line(exc)}: {_URL_HELP}"
        ) from exc
    if engine.dialect.name == "sqlite":
        # WAL is a property of the file, set by the writer that created it: a read-only
        # connection must not try to set it.
        _configure_sqlite(engine, wal=not (in_memory or read_only))
    return engine, sqlite_path


def _read_only_sqlite(path: Path) -> Callable[[], Any]:
    """A DB-API connect function opening the SQLite file `path` read-only.

    `mode=ro` never writes the database file. In WAL mode SQLite still needs the `-shm`
    and `-wal` files beside it (it creates them empty if it can); where the directory is
    not writable no writer can use the database either, so it is opened `immutable`.
    """
    import os
    import sqlite3
    from urllib.parse import quote

    uri = f"file:{quote(str(path))}?mode=ro"
    if not os.access(path.parent, os.W_OK):
        uri += "&immutable=1"

    def connect() -> Any:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    return connect


def _check_schema(engine: Engine, masked: str) -> bool:
    """For a read-only open: True if the database has the newest schema, False if it has no
    tables at all (nothing was ever recorded).

    Raises:
        StorageError: Its tables are not Headwater's, or its schema is older or newer than
            this Headwater's (reading must not migrate it).
    """
    from sqlalchemy import inspect

    with engine.connect() as conn:
        revision = migrations.current_revision(conn)
        if revision == migrations.HEAD:
            return True
        if revision is None:
            if not inspect(conn).get_table_names():
                return False
            raise StorageError(
                f"{masked!r} is not a Headwater metadata store (it has tables but no schema "
                "revision): check the URL"
            )
    known = (Path(migrations.__file__).parent / "versions" / f"v{revision}.py").is_file()
    if known:
        raise StorageError(
            f"metadata store {masked!r} has an older schema ({revision!r}; this Headwater "
            f"reads {migrations.HEAD!r}): a command that writes (`headwater run`) upgrades it"
        )
    raise StorageError(
        f"metadata store {masked!r} has a schema newer than this Headwater knows "
        f"({revision!r}; newest known {migrations.HEAD!r}): upgrade headwater, or use "
        "another metadata URL"
    )


def _sqlite_path(url: URL) -> Path | None:
    if url.get_backend_name() != "sqlite" or _sqlite_in_memory(url):
        return None
    database = url.database or ""
    if database.startswith("file:"):  # an SQLite URI filename (uri=true): used as given
        return None
    return Path(database).expanduser().absolute()


def _sqlite_in_memory(url: URL) -> bool:
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and (
        database in ("", ":memory:") or url.query.get("mode") == "memory"
    )


def _with_driver(url: URL) -> URL:
    """`postgres://`/`postgresql://` use psycopg 3 (our `postgres` extra) unless psycopg2 is
    installed, which is SQLAlchemy's default driver."""
    if url.drivername in ("postgres", "postgresql"):
        import importlib.util

        has_psycopg2 = importlib.util.find_spec("psycopg2") is not None
        has_psycopg = importlib.util.find_spec("psycopg") is not None
        driver = "postgresql+psycopg" if has_psycopg and not has_psycopg2 else "postgresql"
        return url.set(drivername=driver)
    return url


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    """`sqlite`'s settings on every connection, and its BEGIN for every transaction."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        sqlite.configure(dbapi_connection, wal=wal)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("headwater_write", False)
        conn.exec_driver_sql(sqlite.begin_statement(write=write))


def _open_error(masked: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, SQLAlchemyError):
        fix = (
            "check that the path is a writable SQLite database file"
            if masked.startswith("sqlite")
            else "check that the server is running and the host, port, database, user and "
            "password are right"
        )
        return StorageError(f"cannot open metadata store {masked!r}: {first_line(exc)}: {fix}")
    # Imported here, not above: alembic loads only when a migration has to run.
    from alembic.util import CommandError

    if isinstance(exc, CommandError):  # a revision we do not know
        return StorageError(
            f"metadata store {masked!r} has a schema newer than this Headwater knows "
            f"({first_line(exc)}; newest known {migrations.HEAD!r}): upgrade headwater, "
            "or use another metadata URL"
        )
    return StorageError(f"cannot open metadata store {masked!r}: {first_line(exc)}")
