"""`SqlMetadataStore` on SQLite: the shared scenarios, URLs, concurrency and locking."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from store_scenarios import (
    SCENARIOS,
    add_execution,
    add_run,
    exactly_one_claims,
    run_claimers,
    run_writers,
)

from headwater.errors import StorageError
from headwater.metadata import MetadataStore, open_store, sqlite
from headwater.metadata.connect import mask_url
from headwater.metadata.sql import SqlMetadataStore


@pytest.fixture(params=["file", "memory"])
def make_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], SqlMetadataStore]]:
    """A factory of stores on one database: a SQLite file in tmp_path, or in memory."""
    url = f"sqlite:///{tmp_path / 'md.db'}" if request.param == "file" else "sqlite://"
    opened: list[SqlMetadataStore] = []

    def make() -> SqlMetadataStore:
        opened.append(SqlMetadataStore(url))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(
    scenario: Callable[[MetadataStore], object], make_store: Callable[[], SqlMetadataStore]
) -> None:
    scenario(make_store())


def test_a_file_store_keeps_everything_across_opens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    with SqlMetadataStore(url) as store:
        add_run(store, "r1")
        add_execution(store, "r1", "t")
    with SqlMetadataStore(url) as store:
        assert [e.task for e in store.list_executions("r1")] == ["t"]
    with sqlite3.connect(tmp_path / "md.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_connections_are_configured(tmp_path: Path) -> None:
    with (
        SqlMetadataStore(f"sqlite:///{tmp_path / 'md.db'}") as store,
        store._engine.connect() as conn,
    ):
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "synchronous", "busy_timeout", "foreign_keys")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 1,
        "busy_timeout": 30000,
        "foreign_keys": 1,
    }


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("notaurl", "'notaurl' is not a SQLAlchemy URL"),
        ("", "'' is not a SQLAlchemy URL"),
        ("foo://x", "unknown database 'foo' (known: sqlite, postgresql)"),
        (
            "postgresql+psycopg://u:secret@127.0.0.1:1/db",
            "'postgresql+psycopg://u:***@127.0.0.1:1/db'",
        ),
        (
            "postgresql+psycopg://u:secret@host:notaport/db",
            "'postgresql+psycopg://u:***@host:notaport/db'",
        ),
        ("sqlite:////nonexistent-dir/md.db", "directory '/nonexistent-dir' does not exist"),
        ("mysql://u:secret@localhost/x", "needs the database driver"),
    ],
    ids=[
        "not-a-url",
        "empty",
        "unknown-dialect",
        "unreachable",
        "bad-port",
        "no-directory",
        "no-driver",
    ],
)
def test_bad_urls_raise_one_line_storage_errors(url: str, shown: str) -> None:
    with pytest.raises(StorageError) as caught:
        SqlMetadataStore(url)
    message = str(caught.value)
    assert shown in message
    assert "\n" not in message
    assert "secret" not in message
    assert ("sqlite:" in message) or ("postgresql" in message) or ("install" in message)


def test_a_directory_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r"cannot open metadata store .* SQLite database file"):
        SqlMetadataStore(f"sqlite:///{tmp_path}")


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
        ("weird://u:pw@h:port/db", "weird://u:***@h:port/db"),
    ],
    ids=["password", "no-password", "sqlite", "unparseable"],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_open_store_defaults_to_headwater_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HEADWATER_METADATA_URL", raising=False)
    store = open_store()
    try:
        assert isinstance(store, SqlMetadataStore)
        assert (tmp_path / "home" / "metadata.db").is_file()
    finally:
        store.close()


def test_open_store_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_METADATA_URL", f"sqlite:///{tmp_path / 'x.db'}")
    store = open_store()
    store.close()
    assert (tmp_path / "x.db").is_file()
    with pytest.raises(StorageError):
        open_store("notaurl")
    # Only the default store's directory is made on demand: elsewhere a missing one is a typo.
    monkeypatch.setenv("HEADWATER_METADATA_URL", f"sqlite:///{tmp_path / 'deep' / 'er' / 'x.db'}")
    with pytest.raises(StorageError, match="does not exist"):
        open_store()
    assert not (tmp_path / "deep").exists()


def test_importing_the_package_does_not_import_sqlalchemy() -> None:
    script = "import sys, headwater.metadata; print('sqlalchemy' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"
    script = (
        "import sys, headwater.metadata as m; m.SqlMetadataStore; "
        "print('sqlalchemy' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "True"


def test_using_a_current_store_imports_neither_the_orm_nor_alembic(tmp_path: Path) -> None:
    # Every CLI command opens the store: the ORM and alembic would add ~0.1 s to each.
    url = f"sqlite:///{tmp_path / 'md.db'}"
    SqlMetadataStore(url).close()  # creates the tables: alembic runs here, not below
    script = f"""
import sys
from headwater.metadata import ExecutionRecord, RunRecord, open_store
store = open_store({url!r})
store.create_run(RunRecord("r", "p", "", "RUNNING"), ir={{}})
store.record_execution(ExecutionRecord(run_id="r", task="t", state="SUCCEEDED"))
store.list_runs()
store.lineage("e:1")
store.close()
print(sorted(m for m in sys.modules if m.split(".")[0] == "alembic" or "sqlalchemy.orm" in m))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_in_memory_store_is_safe_across_threads() -> None:
    with SqlMetadataStore("sqlite://") as store:
        add_run(store, "r")
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(25):
                    add_execution(store, "r", f"t{n}-{i}")
                    store.list_executions("r")
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(store.list_executions("r")) == 100


def test_writes_retry_while_the_database_is_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "md.db"
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 50)
    with SqlMetadataStore(f"sqlite:///{path}") as store:
        add_run(store, "r")
        blocker = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")
        release = threading.Timer(0.4, blocker.rollback)
        release.start()
        started = time.monotonic()
        add_execution(store, "r", "t")  # waits out the lock through retries
        assert time.monotonic() - started >= 0.3
        release.join()
        blocker.close()
        assert [e.task for e in store.list_executions("r")] == ["t"]


def test_a_lock_held_too_long_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "md.db"
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 10)
    monkeypatch.setattr(sqlite, "WRITE_ATTEMPTS", 2)
    with SqlMetadataStore(f"sqlite:///{path}") as store:
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageError, match="database is locked"):
                add_run(store, "r")
            assert store.list_runs() == []  # readers are not blocked by a writer
        finally:
            blocker.rollback()
            blocker.close()


def test_connections_opening_one_new_file_at_once_all_get_wal(tmp_path: Path) -> None:
    # Switching to WAL answers "locked" without waiting while another connection switches
    # the same new file (two deploys at once failed so): each of four must still succeed.
    failures: list[Exception] = []

    def open_and_write(path: Path) -> None:
        try:
            conn = sqlite3.connect(path, timeout=30)
            sqlite.configure(conn)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS t (x)")
            conn.execute("COMMIT")
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            conn.close()
        except Exception as exc:  # collected and asserted below
            failures.append(exc)

    for trial in range(60):
        path = tmp_path / f"new-{trial}.db"
        threads = [threading.Thread(target=open_and_write, args=(path,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


@pytest.mark.slow
def test_eight_processes_write_one_new_database_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    ids = run_writers(url, 8, tmp_path)
    assert len(set(ids)) == 400
    with SqlMetadataStore(url) as store:
        runs = store.list_runs()
        assert len(runs) == 8 and {r.state for r in runs} == {"SUCCEEDED"}
        assert sum(len(store.list_executions(r.run_id)) for r in runs) == 400


@pytest.mark.slow
def test_six_processes_claim_one_run_and_exactly_one_gets_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'claims.db'}"
    with SqlMetadataStore(url) as store:
        add_run(store, "r")
        store.mark_interrupted("r", finished_at=1.0)
        exactly_one_claims(run_claimers(url, "r", 6, tmp_path), store, "r")
