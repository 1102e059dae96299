"""`LiteDatabase`: one `sqlite3` connection to a metadata file, with the SQL store's
transactions and errors.

What `connect.Database` is to `SqlMetadataStore`, this is to `lite.SqliteWriter` (ADR 16):
the connection, opened on first use with the settings in `sqlite`; a transaction per call,
or one for a whole `batch()`; locked writes retried; and each driver error raised as
`SqlMetadataStore` raises it.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import weakref
from typing import TYPE_CHECKING, NoReturn, TypeVar

from headwater.errors import HeadwaterSystemError, NotFoundError, StorageError
from headwater.metadata import sqlite
from headwater.metadata.base import SCHEMA_HEAD

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

T = TypeVar("T")


class LiteDatabase:
    """The SQLite database file `path` (its URL `url`, for messages), opened on first use.

    Opening checks that the schema is `SCHEMA_HEAD` (the statements here are written for it)
    and then calls `_on_open`. Thread-safe: one thread at a time uses the connection;
    `batch()` holds it for its block.
    """

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._batch_thread: int | None = None  # the thread inside batch(), if any
        self._batch_broken = False

    def batching_here(self) -> bool:
        """True on the thread that is inside `batch()`: its reads must see its own writes."""
        return self._batch_thread == threading.get_ident()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                conn = sqlite.connect_file(self.path)
            except sqlite3.Error as exc:
                raise self._open_error(exc) from exc
            try:
                sqlite.configure(conn)
                self._run(conn, self._check_schema, write=False)
                self._run(conn, self._on_open)
            except BaseException as exc:
                conn.close()
                if isinstance(exc, sqlite3.Error):
                    raise self._open_error(exc) from exc
                raise
            weakref.finalize(self, conn.close)
            self._conn = conn
        return self._conn

    def _open_error(self, exc: sqlite3.Error) -> StorageError:
        return StorageError(
            f"cannot open metadata store {self.url!r}: {_first_line(exc)}: "
            "check that the path is a writable SQLite database file"
        )

    def _check_schema(self, conn: sqlite3.Connection) -> None:
        """Refuse a store whose schema changed since it was probed (a newer Headwater
        migrated it meanwhile): these statements are written for `SCHEMA_HEAD` only."""
        found = [v for (v,) in conn.execute("SELECT version_num FROM alembic_version")]
        if found != [SCHEMA_HEAD]:
            raise StorageError(
                f"metadata store {self.url!r} has schema {', '.join(found) or 'none'}, not "
                f"{SCHEMA_HEAD!r}, which this Headwater writes: upgrade headwater, or use "
                "another metadata URL"
            )

    def _on_open(self, conn: sqlite3.Connection) -> None:
        """Called in a write transaction when the connection opens: for subclasses."""

    def close(self) -> None:
        """Close the connection; it opens again if used."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write of this thread inside the block in one write transaction."""
        with self._lock:
            if self.batching_here():
                yield
                return
            conn = self._connection()
            try:
                conn.execute(sqlite.begin_statement(write=True))
            except sqlite3.Error as exc:
                raise self._storage_error(exc) from exc
            self._batch_thread = threading.get_ident()
            self._batch_broken = False
            try:
                yield
            except BaseException:
                _rollback(conn)
                raise
            finally:
                self._batch_thread = None
            try:
                if self._batch_broken:  # SQLite ended it after an error the caller caught
                    raise sqlite3.OperationalError("the transaction was rolled back by SQLite")
                _commit(conn)
            except sqlite3.Error as exc:
                _rollback(conn)
                raise self._storage_error(exc) from exc

    def _transaction(
        self, fn: Callable[[sqlite3.Connection], T], *, refers_to: str = "", write: bool = True
    ) -> T:
        """`fn` in one transaction (or the open batch's); errors as the SQL store's."""
        with self._lock:
            conn = self._connection()
            if not self.batching_here():
                return self._run(conn, fn, refers_to=refers_to, write=write)
            if self._batch_broken:
                raise StorageError(
                    f"metadata store {self.url!r} failed: an earlier write of this batch ended "
                    "its transaction, so nothing more of it is written"
                )
            try:
                return fn(conn)
            except sqlite3.Error as exc:
                if not conn.in_transaction:  # SQLite rolled the whole batch back
                    self._batch_broken = True
                self._raise(exc, refers_to)

    def _run(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection], T],
        *,
        refers_to: str = "",
        write: bool = True,
    ) -> T:
        """`fn` in a transaction of its own on `conn`: locked writes retried, as `connect`."""
        attempt = 0
        while True:
            attempt += 1
            try:
                conn.execute(sqlite.begin_statement(write=write))
                try:
                    result = fn(conn)
                except BaseException:
                    _rollback(conn)
                    raise
                _commit(conn)
                return result
            except sqlite3.OperationalError as exc:
                if write and sqlite.is_locked(str(exc)) and attempt < sqlite.WRITE_ATTEMPTS:
                    time.sleep(sqlite.retry_delay(attempt))
                    continue
                self._raise(exc, refers_to)
            except sqlite3.IntegrityError as exc:
                if write and attempt < 2:
                    continue
                self._raise(exc, refers_to)
            except sqlite3.Error as exc:
                self._raise(exc, refers_to)

    def _raise(self, exc: sqlite3.Error, refers_to: str) -> NoReturn:
        """Raise what `SqlMetadataStore` raises for this driver error: a missing reference
        is NotFoundError, a failing database StorageError, and a value the driver cannot
        bind goes through as it is, as there."""
        if isinstance(exc, sqlite3.IntegrityError):
            raise self._integrity_error(exc, refers_to) from exc
        if isinstance(exc, sqlite3.ProgrammingError | sqlite3.InterfaceError):
            raise exc
        raise self._storage_error(exc) from exc

    def _storage_error(self, exc: sqlite3.Error) -> StorageError:
        return StorageError(
            f"metadata store {self.url!r} failed: {_first_line(exc)}: "
            "check that the database is reachable and not locked by another program"
        )

    def _integrity_error(self, exc: sqlite3.IntegrityError, refers_to: str) -> Exception:
        if not refers_to:
            return HeadwaterSystemError(
                f"metadata store {self.url!r} refused a write: {_first_line(exc)}"
            )
        return NotFoundError(
            f"{refers_to} is not in the metadata store {self.url!r} "
            f"({_first_line(exc)}): record it first"
        )


def _commit(conn: sqlite3.Connection) -> None:
    """COMMIT; if that fails, roll back what is left, so the connection is never left inside
    a transaction (a later BEGIN would fail) and nothing half-written is kept."""
    try:
        conn.execute("COMMIT")
    except sqlite3.Error:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    """ROLLBACK if a transaction is open (SQLite ends some on its own, e.g. when the disk
    is full); never hides the error that led here."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return " ".join(lines[0].split()) if lines else type(exc).__name__
