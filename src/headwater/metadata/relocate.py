"""A `HEADWATER_HOME` moved or copied elsewhere: its store's paths follow it.

The default store (`$HEADWATER_HOME/metadata.db`) records absolute paths under the home:
artifact URIs, task logs, model URIs, the runs' pipeline root. The home keeps a note of the
path it was at (`home-path`, beside the database). When a command opens the store and the
home is no longer there (`mv`, `cp -r`, a restored backup), every path recorded under the
old place is rewritten to the new one, once, in one transaction, and the note updated; a
copy left at the old place keeps its own paths. Paths outside the home (another pipeline
root, `s3://...`) are left as they are. See ADR 0055.

A store made before the note existed is taken to be where its newest runs' default pipeline
root (`<home>/artifacts`) says it was, when that folder no longer exists.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

from headwater.errors import StorageError

#: The note of where the home was when its store last recorded a path.
NOTE = "home-path"

#: (table, column) holding a path or URI as its whole value.
_PATHS = (
    ("runs", "pipeline_root"),
    ("executions", "log_path"),
    ("artifacts", "uri"),
    ("models", "uri"),
    ("endpoints", "log_path"),
)
#: (table, key column, column) holding JSON whose strings may be paths (outputs, errors).
_JSON = (
    ("runs", "run_id", "outputs"),
    ("runs", "run_id", "error"),
    ("executions", "id", "outputs"),
    ("executions", "id", "error"),
    ("endpoints", "name", "models"),
    ("endpoints", "name", "config"),
)


def follow_home(home: Path, database: Path, *, note_unmoved: bool = True) -> str | None:
    """Rewrite the paths of the store `database` in `home` if the home was moved.

    Args:
        home: Where the home is now.
        database: Its store's SQLite file.
        note_unmoved: Write the note where it is missing or stale though nothing moved (a
            command that only reads writes nothing then).

    Returns:
        The path the home was moved from, or None when it was not.

    Raises:
        StorageError: The store could not be rewritten (read-only, say); the message says
            how to fix it.
    """
    current = str(home.expanduser().absolute())
    note = home / NOTE
    try:
        recorded = note.read_text(encoding="utf-8").strip()
    except OSError:
        recorded = ""
    if recorded == current:
        return None
    if not database.is_file():
        if note_unmoved:
            _write_note(note, current)
        return None
    try:
        conn = sqlite3.connect(database, timeout=30)
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open {str(database)!r}: {exc}") from exc
    try:
        old = recorded or _inferred(conn, current)
        if old and old != current:
            with conn:
                _rewrite(conn, old, current)
    except sqlite3.Error as exc:
        raise StorageError(
            f"HEADWATER_HOME moved from {old!r} to {current!r}, and the paths its store "
            f"records could not follow it ({exc}): make {str(database)!r} writable and run "
            "the command again"
        ) from exc
    finally:
        conn.close()
    if (old and old != current) or note_unmoved:
        _write_note(note, current)
    return old if old and old != current else None


def _inferred(conn: sqlite3.Connection, current: str) -> str:
    """Where a store without a note was: the home of its newest run's default pipeline root,
    when that place holds no home any more ('' when none says)."""
    with contextlib.suppress(sqlite3.Error):
        rows = conn.execute(
            "SELECT pipeline_root FROM runs ORDER BY created_at DESC LIMIT 50"
        ).fetchall()
        for (root,) in rows:
            if isinstance(root, str) and root.endswith("/artifacts"):
                home = root[: -len("/artifacts")]
                # Gone from there (a pipeline root of its own elsewhere is still there).
                if home != current and not os.path.exists(root):
                    return home
    return ""


def _rewrite(conn: sqlite3.Connection, old: str, new: str) -> None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for prefix_old, prefix_new in ((old, new), (f"file://{old}", f"file://{new}")):
        for table, column in _PATHS:
            if table not in tables:
                continue
            conn.execute(
                f"UPDATE {table} SET {column} = ? || substr({column}, ?) "
                f"WHERE substr({column}, 1, ?) = ?",
                (f"{prefix_new}/", len(prefix_old) + 2, len(prefix_old) + 1, f"{prefix_old}/"),
            )
    # Inside JSON a path is a string: `"<old>/...` (or `"file://<old>/...`) as JSON writes it.
    quoted_old, quoted_new = json.dumps(old)[1:-1], json.dumps(new)[1:-1]
    for table, key, column in _JSON:
        if table not in tables:
            continue
        rows = conn.execute(
            f"SELECT {key}, {column} FROM {table} WHERE {column} LIKE ?",
            (f"%{quoted_old}/%",),
        ).fetchall()
        for row_key, text in rows:
            if not isinstance(text, str):
                continue
            moved = text.replace(f'"{quoted_old}/', f'"{quoted_new}/').replace(
                f'"file://{quoted_old}/', f'"file://{quoted_new}/'
            )
            if moved != text:
                conn.execute(
                    f"UPDATE {table} SET {column} = ? WHERE {key} = ?",
                    (moved, row_key),
                )


def _write_note(note: Path, current: str) -> None:
    # Best effort: a home that cannot be written to (read-only media) is read where it is.
    with contextlib.suppress(OSError):
        note.write_text(current + "\n", encoding="utf-8")
