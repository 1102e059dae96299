"""`headwater.lineage`, `get_artifact` and `clear_cache` on a real SQLite store."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

import headwater
from headwater.errors import InvalidArgumentError, NotFoundError

if TYPE_CHECKING:  # conftest is not importable by name when several folders have one
    from conftest import Seeded


def test_artifact_by_id_uri_and_prefixed_id(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    by_id = headwater.get_artifact(made.model_id)
    assert headwater.get_artifact(str(made.model_id)) == by_id
    assert headwater.get_artifact(f"a:{made.model_id}") == by_id
    assert headwater.get_artifact("/tmp/root/model") == by_id
    assert (by_id.uri, by_id.name, by_id.size) == ("/tmp/root/model", "model", 3)
    assert by_id.producer is not None
    assert (by_id.producer.task, by_id.producer.run_id) == ("train", "ok")
    assert by_id.to_json()["producer"] == {
        "execution_id": made.train_id,
        "task": "train",
        "run_id": "ok",
    }


@pytest.mark.parametrize(
    "ref",
    ["123456789012345678901234567890", "a:123456789012345678901234567890", 10**30, 999, "/x"],
    ids=["30-digits", "prefixed-30-digits", "huge-int", "unknown-id", "unknown-uri"],
)
def test_unknown_artifact_is_not_found(seeded: Callable[..., Seeded], ref: int | str) -> None:
    seeded()
    with pytest.raises(NotFoundError, match="no artifact"):
        headwater.get_artifact(ref)


def test_lineage_presents_a_dead_engine_run_interrupted(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    graph = headwater.lineage(made.model_id, direction="downstream")
    nodes = {n["id"]: n for n in graph.nodes}
    assert nodes["r:dead"]["state"] == "INTERRUPTED"
    work = next(n for n in graph.nodes if n.get("task") == "work")
    assert work["state"] == "FAILED"
    evaluate = next(n for n in graph.nodes if n.get("task") == "evaluate")
    assert evaluate["state"] == "SUCCEEDED"
    assert nodes["r:ok"]["state"] == "SUCCEEDED"
    with sqlite3.connect(made.db) as conn:
        assert conn.execute("SELECT state FROM runs WHERE run_id = 'dead'").fetchone() == (
            "RUNNING",
        )


def test_lineage_upstream_and_depth(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    up = headwater.lineage(made.model_id, direction="UPSTREAM")
    ids = {n["id"] for n in up.nodes}
    assert {f"a:{made.model_id}", f"e:{made.train_id}", f"a:{made.data_id}", "r:ok"} == ids
    alone = headwater.lineage(made.model_id, depth=0)
    assert [n["id"] for n in alone.nodes] == [f"a:{made.model_id}"]
    assert headwater.lineage(f"e:{made.train_id}", depth=1).to_json()["edges"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"direction": "sideways"}, InvalidArgumentError),
        ({"depth": -5}, InvalidArgumentError),
        ({"ref": "123456789012345678901234567890"}, NotFoundError),
        ({"ref": "e:123456789012345678901234567890"}, NotFoundError),
        ({"ref": "e:999"}, NotFoundError),
    ],
    ids=["direction", "negative-depth", "30-digit-artifact", "30-digit-execution", "unknown"],
)
def test_lineage_bad_input(
    seeded: Callable[..., Seeded], kwargs: dict[str, object], error: type[Exception]
) -> None:
    made = seeded()
    args: dict[str, object] = {"ref": made.model_id, **kwargs}
    with pytest.raises(error):
        headwater.lineage(**args)  # type: ignore[arg-type]


def test_clear_cache_forgets_keys_and_keeps_runs(seeded: Callable[..., Seeded]) -> None:
    made = seeded()
    assert headwater.clear_cache() == 2
    assert headwater.clear_cache() == 0
    with sqlite3.connect(made.db) as conn:
        keys = conn.execute("SELECT cache_key FROM executions WHERE run_id = 'ok'").fetchall()
    assert keys == [("",), ("",)]
    assert headwater.get_run("ok").state == "SUCCEEDED"
