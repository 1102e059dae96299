"""`DeferredSqlStore`: when a store may open late, cache misses without SQLAlchemy, and the
shared scenarios through the wrapper."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from store_scenarios import SCENARIOS, add_execution, add_run

from headwater.metadata import MetadataStore, RunRecord, open_store
from headwater.metadata.deferred import DeferredSqlStore


@pytest.fixture
def make_url(tmp_path: Path) -> Callable[[], str]:
    """A factory: the URL of a SQLite store in tmp_path, created and migrated."""

    def make() -> str:
        url = f"sqlite:///{tmp_path / 'md.db'}"
        open_store(url).close()
        return url

    return make


@pytest.fixture
def deferred(make_url: Callable[[], str]) -> Iterator[DeferredSqlStore]:
    store = DeferredSqlStore.for_url(make_url())
    assert store is not None
    yield store
    store.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
def test_scenario(scenario: Callable[[MetadataStore], object], deferred: DeferredSqlStore) -> None:
    scenario(deferred)


def test_cache_lookups_do_not_open_the_store(deferred: DeferredSqlStore) -> None:
    assert deferred.cached_outputs("nothing-has-this-key") is None
    assert deferred.cached_outputs("") is None
    add_run(deferred, "r")
    found = add_execution(deferred, "r", "t", cache_key="k1")
    hit = deferred.cached_outputs("k1")
    assert hit is not None and hit[0].id == found
    assert deferred.get_artifact("file:///nowhere") is None
    assert deferred._real is None


@pytest.mark.parametrize("state", ["FAILED", "CACHED", "RUNNING"])
def test_only_succeeded_executions_are_hits(deferred: DeferredSqlStore, state: str) -> None:
    add_run(deferred, "r")
    add_execution(deferred, "r", "t", state, cache_key="k1")
    assert deferred.cached_outputs("k1") is None


def test_the_probe_sees_rows_another_store_wrote(make_url: Callable[[], str]) -> None:
    url = make_url()
    store = DeferredSqlStore.for_url(url)
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
    store = DeferredSqlStore.for_url(url)
    assert store is not None
    record = store.get_run("dead")
    assert record is not None and record.state == "INTERRUPTED"
    store.close()


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
    assert DeferredSqlStore.for_url(url) is None


def test_a_deferred_miss_imports_no_sqlalchemy(make_url: Callable[[], str]) -> None:
    script = (
        "import sys\n"
        "from headwater.engine.runner import open_metadata\n"
        f"store = open_metadata({make_url()!r})\n"
        "assert store.cached_outputs('no-such-key') is None\n"
        "print(type(store).__name__, 'sqlalchemy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["DeferredSqlStore", "False"]
