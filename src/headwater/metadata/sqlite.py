"""How Headwater connects to a SQLite metadata file: the one place for its settings.

Both writers of a SQLite store use these: `connect.Database` (SQLAlchemy) through its
`connect` and `begin` events, and `lite.SqliteWriter` (the standard library's `sqlite3`,
ADR 16) directly. Every connection runs with a 30 s busy timeout and foreign keys on, a
writable file in WAL mode with `synchronous=NORMAL`; the driver never begins a transaction
itself (pysqlite's implicit BEGIN would be DEFERRED, and a deferred transaction that later
writes can fail at once with "locked"): writes begin with `BEGIN IMMEDIATE`, so concurrent
writers queue, and a write still locked after the timeout is retried a few times.

No SQLAlchemy here: `headwater run` imports this module before its first task.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

#: Attempts for a write that finds the SQLite database locked past its busy timeout.
WRITE_ATTEMPTS = 4
#: How long (ms) SQLite waits on a lock before a statement fails with "database is locked".
BUSY_TIMEOUT_MS = 30_000


def configure(dbapi_connection: Any, *, wal: bool = True) -> None:
    """Apply Headwater's settings to a new DB-API SQLite connection.

    Args:
        dbapi_connection: A `sqlite3.Connection` (SQLAlchemy's raw one, or our own).
        wal: Put the file in WAL mode with `synchronous=NORMAL`. WAL is a property of the
            file, set by the writer that created it: a read-only or in-memory connection
            must not try to set it.
    """
    dbapi_connection.isolation_level = None  # we BEGIN ourselves: see `begin_statement`
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys = ON")
    if wal:
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.close()


def _use_wal(cursor: Any) -> None:
    """Put the file in WAL mode unless it is already.

    Switching a new file to WAL takes its exclusive lock, and SQLite answers "database is
    locked" at once, without its busy handler, while another connection is switching it too
    (two servers or engines opening one new store): retry that until the busy timeout.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    attempt = 0
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_locked(str(exc)) or time.monotonic() > deadline:
                raise
        time.sleep(min(0.01 * 2**attempt, 0.5))
        attempt += 1


def begin_statement(*, write: bool) -> str:
    """The statement that starts a transaction: IMMEDIATE (the write lock at once) to write."""
    return "BEGIN IMMEDIATE" if write else "BEGIN"


def connect_file(path: Path) -> sqlite3.Connection:
    """A connection, usable from any thread, to the existing database file `path` (never
    created), with the driver's own transactions off and its busy timeout set.

    Raises:
        sqlite3.Error: It cannot be opened.
    """
    conn = sqlite3.connect(
        f"{path.as_uri()}?mode=rw",
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        check_same_thread=False,
    )
    conn.isolation_level = None
    return conn


def retry_delay(attempt: int) -> float:
    """Seconds to wait before retrying a write locked on its `attempt`-th try."""
    return 0.05 * 4.0**attempt


def is_locked(message: str) -> bool:
    """True if a driver error's message says the database was locked (worth retrying)."""
    text = message.lower()
    return "database is locked" in text or "database is busy" in text
