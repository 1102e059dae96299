"""`open_run_stores`: when a store may open late, cache misses without SQLAlchemy, the shared
scenarios with the run's writes through `SqliteWriter`; and `RunRecorder`'s implementations."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_scenarios import SCENARIOS, add_execution, add_run

from headwater.metadata import MetadataStore, RunRecord, SqlMetadataStore, open_store
from headwater.metadata.lite import SqliteWriter
from headwater.metadata.recorder import RunRecorder, RunStores, open_run_stores


class Routed:
    """A store as a run sees it: the methods `SqliteWriter` has go to `stores.recorder`,
    every other method to `stores.full()` (SQLAlchemy)."""

    WRITER = frozenset(
        name for name in vars(MetadataStore) if not name.startswith("_") and name != "close"
    ) & frozenset(dir(SqliteWriter))

    def __init__(self, stores: RunStores) -> None:
        self.stores = stores

    def __getattr__(self, name: str) -> Any:
        target = self.stores.recorder if name in self.WRITER else self.stores.full()
        return getattr(target, name)


@pytest.fixture
def make_url(tmp_path: Path) -> Callable[[], str]:
    """A factory: the URL of a SQLite store in tmp_path, created and migrated."""

    def make() -> str:
        url = f"sqlite:///{tmp_path / 'md.db'}"
        open_store(url).close()
        return url

    return make


@pytest.fixture
def stores(make_url: Callable[[], str]) -> Iterator[RunStores]:
    opened = open_run_stores(make_url())
    assert isinstance(opened.recorder, SqliteWriter)
    yield opened
    opened.close()


def test_the_run_writes_through_the_writer() -> None:
    # What the scenarios below send to SqliteWriter: every write of a run, and its reads.
    assert {
        "create_run",
        "finish_run",
        "record_execution",
        "insert_executions",
        "record_artifact",
        "record_event",
        "record_events",
        "record_metrics",
        "record_step_metrics",
        "get_artifact",
        "cached_outputs",
        "batch",
    } <= Routed.WRITER


def test_both_stores_are_run_recorders(tmp_path: Path, make_url: Callable[[], str]) -> None:
    writer = SqliteWriter.for_url(make_url())
    assert isinstance(writer, RunRecorder)
    with SqlMetadataStore(f"sqlite:///{tmp_path / 'other.db'}") as store:
        assert isinstance(store, RunRecorder)
    writer.close()


def test_a_store_passed_in_is_used_as_it_is(tmp_path: Path) -> None:
    with SqlMetadataStore(f"sqlite:///{tmp_path / 'md.db'}") as store:
        opened = open_run_stores(store)
        assert opened.recorder is store
        assert opened.full.is_open and opened.full() is store


def test_a_store_that_must_open_now_is_opened_now(tmp_path: Path) -> None:
    opened = open_run_stores(f"sqlite:///{tmp_path / 'new.db'}")  # created: SQLAlchemy
    assert isinstance(opened.recorder, SqlMetadataStore)
    assert opened.full.is_open and opened.full() is opened.recorder
    opened.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(scenario: Callable[[MetadataStore], object], stores: RunStores) -> None:
    scenario(Routed(stores))


def test_cache_lookups_do_not_open_the_store(stores: RunStores) -> None:
    deferred = Routed(stores)
    assert deferred.cached_outputs("nothing-has-this-key") is None
    assert deferred.cached_outputs("") is None
    add_run(deferred, "r")
    found = add_execution(deferred, "r", "t", cache_key="k1")
    hit = deferred.cached_outputs("k1")
    assert hit is not None and hit[0].id == found
    assert deferred.get_artifact("file:///nowhere") is None
    assert not stores.full.is_open


@pytest.mark.parametrize("state", ["FAILED", "CACHED", "RUNNING"])
def test_only_succeeded_executions_are_hits(stores: RunStores, state: str) -> None:
    add_run(stores.recorder, "r")
    add_execution(stores.recorder, "r", "t", state, cache_key="k1")
    assert stores.recorder.cached_outputs("k1") is None


def test_the_probe_sees_rows_another_store_wrote(make_url: Callable[[], str]) -> None:
    url = make_url()
    store = SqliteWriter.for_url(url)
    assert store is not None
    assert store.cached_outputs("k1") is None
    writer = open_store(url)
    add_run(writer, "r")
    add_execution(writer, "r", "t", cache_key="k1")
    writer.close()
    hit = store.cached_outputs("k1")
    assert hit is not None and hit[0].cache_key == "k1"
    store.close()


def test_opening_marks_dead_runs_interrupted(make_url: Callable[[], str]) -> None:
    url = make_url()
    writer = open_store(url)
    # An engine on this host with pid 0: no such process.
    dead = RunRecord("dead", "p", "v1", "RUNNING", engine_host=socket.gethostname())
    writer.create_run(dead, ir={})
    writer.close()
    stores = open_run_stores(url)
    assert isinstance(stores.recorder, SqliteWriter)
    record = stores.full().get_run("dead")
    assert record is not None and record.state == "INTERRUPTED"
    stores.close()


@pytest.mark.parametrize(
    "how",
    ["missing-file", "not-a-database", "older-schema", "no-schema", "query-options", "relative"],
)
def test_stores_that_must_open_now_are_not_deferred(
    make_url: Callable[[], str], tmp_path: Path, how: str
) -> None:
    path = tmp_path / "md.db"
    url = f"sqlite:///{path}"
    if how == "not-a-database":
        path.write_bytes(b"not sqlite at all" * 100)
    elif how == "older-schema":
        url = make_url()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE alembic_version SET version_num = '0001_initial'")
    elif how == "no-schema":
        sqlite3.connect(path).close()
    elif how == "query-options":
        url = make_url() + "?timeout=5"
    elif how == "relative":
        make_url()
        url = "sqlite:///md.db"
    assert SqliteWriter.for_url(url) is None


def test_a_deferred_miss_imports_no_sqlalchemy(make_url: Callable[[], str]) -> None:
    script = (
        "import sys\n"
        "from headwater.metadata.recorder import open_run_stores\n"
        f"store = open_run_stores({make_url()!r}).recorder\n"
        "assert store.cached_outputs('no-such-key') is None\n"
        "print(type(store).__name__, 'sqlalchemy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SqliteWriter", "False"]
