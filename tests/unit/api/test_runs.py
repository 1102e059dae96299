"""`headwater.list_runs`, `get_run` and `delete_run` on a real SQLite store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import headwater
from headwater.errors import InvalidArgumentError, NotFoundError, StorageError, UserError
from headwater.metadata import open_store

if TYPE_CHECKING:  # conftest is not importable by name when several folders have one
    from conftest import Seeded


def stored_states(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT run_id, state FROM runs").fetchall())


def test_dead_engine_run_is_listed_interrupted(seeded: Callable[..., Seeded]) -> None:
    seeded()
    listed = {r.run_id: r.state for r in headwater.list_runs()}
    assert listed == {
        "dead": "INTERRUPTED",
        "abroad": "RUNNING",
        "ok": "SUCCEEDED",
        "broken": "FAILED",
        "old": "INTERRUPTED",
    }


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("RUNNING", ["abroad"]),
        ("interrupted", ["dead", "old"]),
        ("SUCCEEDED", ["ok"]),
        ("FAILED", ["broken"]),
    ],
    ids=["running-excludes-dead", "interrupted-includes-dead", "succeeded", "failed"],
)
def test_state_filter_sees_runs_as_presented(
    seeded: Callable[..., Seeded], state: str, expected: list[str]
) -> None:
    seeded()
    assert [r.run_id for r in headwater.list_runs(state=state)] == expected


@pytest.mark.parametrize(
    ("state", "limit", "offset", "expected"),
    [
        (None, 2, 0, ["dead", "abroad"]),
        (None, 2, 2, ["ok", "broken"]),
        (None, 2, 4, ["old"]),
        (None, None, 3, ["broken", "old"]),
        ("INTERRUPTED", 1, 0, ["dead"]),
        ("INTERRUPTED", 1, 1, ["old"]),
        ("INTERRUPTED", 5, 2, []),
    ],
    ids=["first-page", "second-page", "last-page", "no-limit", "merged-1", "merged-2", "past"],
)
def test_paging(
    seeded: Callable[..., Seeded],
    state: str | None,
    limit: int | None,
    offset: int,
    expected: list[str],
) -> None:
    seeded()
    page = headwater.list_runs(state=state, limit=limit, offset=offset)
    assert [r.run_id for r in page] == expected


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"text": "O"}, ["ok", "old"]),
        ({"text": "fail"}, ["broken"]),
        ({"text": "ok", "state": "succeeded"}, ["ok"]),
        ({"text": "d", "state": "INTERRUPTED"}, ["dead", "old"]),
        ({"text": "ab", "state": "RUNNING"}, ["abroad"]),
        ({"text": "o", "limit": 1, "offset": 1}, ["old"]),
        ({"text": "  "}, ["dead", "abroad", "ok", "broken", "old"]),
    ],
    ids=["id-prefix", "state-part", "with-state", "dead-engine", "running", "paged", "blank"],
)
def test_text_filter(
    seeded: Callable[..., Seeded], kwargs: dict[str, object], expected: list[str]
) -> None:
    seeded()
    assert [r.run_id for r in headwater.list_runs(**kwargs)] == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"state": "BOGUS"},
        {"limit": -1},
        {"limit": 0},
        {"offset": -3},
        {"limit": 10**30},
        {"limit": True},
    ],
    ids=["state", "negative-limit", "zero-limit", "negative-offset", "huge-limit", "bool"],
)
def test_bad_arguments_are_refused(
    seeded: Callable[..., Seeded], kwargs: dict[str, object]
) -> None:
    seeded()
    with pytest.raises(InvalidArgumentError) as caught:
        headwater.list_runs(**kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)  # catchable as Python's own argument error
    assert "\n" not in str(caught.value)


def test_get_run_shows_tasks_artifacts_and_presented_states(
    seeded: Callable[..., Seeded],
) -> None:
    seeded()
    ok = headwater.get_run("ok")
    assert (ok.state, ok.metrics, ok.parameters, ok.duration) == ("SUCCEEDED", {"acc": 0.9},
                                                                   {"n": 1}, 2.0)  # fmt: skip
    train, evaluate = ok.tasks
    assert (train.name, train.input_artifacts, train.output_artifacts) == (
        "train",
        {"data": ["/tmp/root/data"]},
        {"model": ["/tmp/root/model"]},
    )
    assert train.duration == 1.5
    assert evaluate.input_artifacts == {"model": ["/tmp/root/model"]}

    dead = headwater.get_run("de")  # a unique prefix
    assert dead.state == "INTERRUPTED"
    tasks = {t.name: t for t in dead.tasks}
    assert tasks["work"].state == "FAILED"
    assert tasks["work"].error is not None and tasks["work"].error["error_type"] == "Interrupted"
    assert tasks["done"].state == "SUCCEEDED"


def test_run_json_is_one_shape(seeded: Callable[..., Seeded]) -> None:
    seeded()
    [listed] = [r for r in headwater.list_runs() if r.run_id == "ok"]
    shown = headwater.get_run("ok").to_json()
    assert {k: v for k, v in shown.items() if k != "tasks"} == listed.to_json()
    assert listed.to_json()["created_at"] == "1970-01-01T00:05:00Z"
    task = shown["tasks"][0]
    assert task["artifacts"] == {
        "inputs": {"data": ["/tmp/root/data"]},
        "outputs": {"model": ["/tmp/root/model"]},
    }
    assert (task["duration"], task["cached"]) == ("1.50s", False)


def test_reading_writes_nothing(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    before = (made.db.read_bytes(), made.db.stat().st_mtime_ns)
    files = set(made.db.parent.iterdir())

    headwater.list_runs()
    headwater.list_runs(state="INTERRUPTED")
    headwater.get_run("dead")
    headwater.lineage(made.model_id)
    headwater.get_artifact(made.model_id)

    assert (made.db.read_bytes(), made.db.stat().st_mtime_ns) == before
    assert stored_states(made.db)["dead"] == "RUNNING"  # the durable write is a writer's
    # SQLite's read-only WAL readers may add its (empty) -wal and -shm files; nothing else.
    added = {p.name for p in set(made.db.parent.iterdir()) - files}
    assert added <= {"metadata.db-wal", "metadata.db-shm"}
    wal = made.db.with_name("metadata.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_the_next_writer_records_the_interruption(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    headwater.clear_cache()
    assert stored_states(made.db)["dead"] == "INTERRUPTED"


def test_missing_default_store_reads_as_empty_and_is_not_created(home: Path) -> None:
    assert headwater.list_runs() == []
    with pytest.raises(NotFoundError):
        headwater.get_run("x")
    with pytest.raises(NotFoundError):
        headwater.delete_run("x")
    assert headwater.clear_cache() == 0
    assert not home.exists()


def test_empty_database_file_reads_as_empty(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    db.touch()
    assert headwater.list_runs(metadata=f"sqlite:///{db}") == []
    assert db.read_bytes() == b""


@pytest.mark.parametrize("where", ["missing-file", "missing-dir"])
def test_a_missing_store_elsewhere_is_an_error(home: Path, tmp_path: Path, where: str) -> None:
    db = tmp_path / "md.db" if where == "missing-file" else tmp_path / "no" / "such" / "md.db"
    with pytest.raises(StorageError, match=r"md\.db"):
        headwater.list_runs(metadata=f"sqlite:///{db}")
    assert not db.exists()


def test_writers_create_only_the_default_store(home: Path, tmp_path: Path) -> None:
    open_store().close()
    assert (home / "metadata.db").is_file()
    typo = tmp_path / "no" / "such" / "md.db"
    with pytest.raises(StorageError, match="does not exist"):
        open_store(f"sqlite:///{typo}")
    assert not typo.parent.exists()


def test_a_newer_schema_is_refused_by_readers(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    with sqlite3.connect(made.db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999_from_the_future'")
    with pytest.raises(StorageError, match="newer"):
        headwater.list_runs()


def test_an_older_schema_is_refused_by_readers_and_left_alone(
    seeded: Callable[..., Seeded], monkeypatch: pytest.MonkeyPatch
) -> None:
    from headwater.metadata import migrations

    made = seeded()
    before = made.db.read_bytes()
    # As if this Headwater had a newer revision than the one the store was made at.
    monkeypatch.setattr(migrations, "HEAD", "0002_next")
    with pytest.raises(StorageError, match=r"older schema .*`headwater run`"):
        headwater.list_runs()
    assert made.db.read_bytes() == before


def test_tables_that_are_not_ours_are_refused(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StorageError, match="not a Headwater metadata store"):
        headwater.list_runs(metadata=f"sqlite:///{db}")


def test_delete_run(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    with pytest.raises(UserError, match=r"RUNNING .*terminate it"):
        headwater.delete_run("abroad")
    # A dead engine's run is INTERRUPTED, so it can be deleted.
    deleted = headwater.delete_run("dead")
    assert deleted.run_id == "dead"
    assert "dead" not in stored_states(made.db)
    with pytest.raises(NotFoundError):
        headwater.get_run("dead")


def test_an_open_store_can_be_passed(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    store = open_store(made.url)
    try:
        assert [r.run_id for r in headwater.list_runs(limit=1, metadata=store)] == ["dead"]
        assert headwater.get_run("ok", metadata=store).state == "SUCCEEDED"
    finally:
        store.close()
