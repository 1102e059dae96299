"""Behaviour every `MetadataStore` backend must show, as plain functions of an empty store.

`test_sql_store.py` runs them on SQLite (file and in-memory) and
`tests/integration/test_metadata_postgres.py` on PostgreSQL.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.errors import InvalidArgumentError, NotFoundError, RunClaimedError, UserError
from headwater.metadata import (
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    MetadataStore,
    RunRecord,
    StepSeriesRecord,
)

IR = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}}}


def add_run(
    store: MetadataStore,
    run_id: str,
    *,
    pipeline: str = "p",
    version: str = "v1",
    created_at: float = 100.0,
    parameters: dict[str, Any] | None = None,
) -> None:
    record = RunRecord(
        run_id=run_id,
        pipeline=pipeline,
        pipeline_version=version,
        state="RUNNING",
        parameters=parameters or {},
        pipeline_root="/tmp/root",
        created_at=created_at,
        engine_host="host",
        engine_pid=42,
    )
    store.create_run(record, ir={**IR, "v": version})


def add_execution(
    store: MetadataStore, run_id: str, task: str, state: str = "SUCCEEDED", **kw: Any
) -> int:
    return store.record_execution(ExecutionRecord(run_id=run_id, task=task, state=state, **kw))


def add_artifact(store: MetadataStore, uri: str, producer: int | None = None, **kw: Any) -> int:
    return store.record_artifact(ArtifactRecord(uri=uri, producer=producer, **kw))


def link(store: MetadataStore, execution_id: int, artifact_id: int, kind: str, slot: str) -> None:
    store.record_event(EventRecord(execution_id, artifact_id, kind, slot))  # type: ignore[arg-type]


# -- runs -------------------------------------------------------------------------------


def runs_round_trip(store: MetadataStore) -> None:
    add_run(store, "run-a", parameters={"lr": 0.1, "tags": ["x"]})
    run = store.get_run("run-a")
    assert run is not None
    assert (run.run_id, run.pipeline, run.pipeline_version, run.state) == (
        "run-a",
        "p",
        "v1",
        "RUNNING",
    )
    assert run.parameters == {"lr": 0.1, "tags": ["x"]}
    assert (run.pipeline_root, run.created_at, run.finished_at) == ("/tmp/root", 100.0, None)
    assert (run.engine_host, run.engine_pid, run.error, run.outputs) == ("host", 42, None, {})
    assert store.get_pipeline_ir("run-a") == {**IR, "v": "v1"}
    assert store.running_runs()[0].run_id == "run-a"

    store.finish_run(
        "run-a",
        state="FAILED",
        outputs={"o": 1},
        error={"task": "t", "message": "boom"},
        finished_at=150.0,
    )
    run = store.get_run("run-a")
    assert run is not None
    assert (run.state, run.outputs, run.error, run.finished_at) == (
        "FAILED",
        {"o": 1},
        {"task": "t", "message": "boom"},
        150.0,
    )
    assert store.running_runs() == []

    claimed = store.claim_run("run-a", engine_host="other", engine_pid=7)
    assert (claimed.state, claimed.engine_host, claimed.engine_pid) == ("RUNNING", "other", 7)
    run = store.get_run("run-a")
    assert run is not None
    assert (run.state, run.finished_at, run.error, run.engine_host, run.engine_pid) == (
        "RUNNING",
        None,
        None,
        "other",
        7,
    )

    with pytest.raises(UserError, match="run-a"):
        add_run(store, "run-a")
    with pytest.raises(NotFoundError, match="nope"):
        store.finish_run("nope", state="SUCCEEDED", outputs={}, error=None, finished_at=1.0)
    assert store.get_run("nope") is None
    assert store.get_pipeline_ir("nope") is None


def pipeline_versions_are_shared(store: MetadataStore) -> None:
    add_run(store, "r1", version="v1")
    add_run(store, "r2", version="v1")
    add_run(store, "r3", version="v2")
    assert [store.get_pipeline_ir(r) for r in ("r1", "r2", "r3")] == [
        {**IR, "v": "v1"},
        {**IR, "v": "v1"},
        {**IR, "v": "v2"},
    ]
    # No version given: the digest of the IR is the version.
    store.create_run(RunRecord("r4", "p", "", "RUNNING"), ir=IR)
    run = store.get_run("r4")
    assert run is not None and len(run.pipeline_version) == 64


def run_id_prefixes(store: MetadataStore) -> None:
    add_run(store, "abc123")
    add_run(store, "abd456")
    add_run(store, "x_y%z")
    assert store.get_run("abc").run_id == "abc123"  # type: ignore[union-attr]
    assert store.get_run("abd4").run_id == "abd456"  # type: ignore[union-attr]
    assert store.get_pipeline_ir("abc") is not None
    with pytest.raises(NotFoundError, match=r"ambiguous.*abc123, abd456"):
        store.get_run("ab")
    # LIKE wildcards in a prefix are taken literally, and case matters.
    assert store.get_run("x_y%").run_id == "x_y%z"  # type: ignore[union-attr]
    assert store.get_run("x%") is None
    assert store.get_run("ABC") is None
    assert store.get_run("") is None


def list_runs_order_filters_metrics(store: MetadataStore) -> None:
    add_run(store, "old", pipeline="p", created_at=1.0)
    add_run(store, "mid", pipeline="q", created_at=2.0)
    add_run(store, "new", pipeline="p", created_at=3.0)
    store.finish_run("mid", state="SUCCEEDED", outputs={}, error=None, finished_at=4.0)
    e1 = add_execution(store, "new", "train")
    e2 = add_execution(store, "new", "eval")
    a1 = add_artifact(store, "mem://m1", e1)
    a2 = add_artifact(store, "mem://m2", e2)
    store.record_metrics("new", e1, a1, {"acc": 0.5, "loss": 2.0})
    store.record_metrics("new", e2, a2, {"acc": 0.9, "f1": float("nan")})

    assert [r.run_id for r in store.list_runs()] == ["new", "mid", "old"]
    assert [r.run_id for r in store.list_runs(limit=2)] == ["new", "mid"]
    assert [r.run_id for r in store.list_runs(pipeline="p")] == ["new", "old"]
    assert [r.run_id for r in store.list_runs(state="SUCCEEDED")] == ["mid"]
    assert [r.run_id for r in store.list_runs(pipeline="p", state="SUCCEEDED")] == []
    newest = store.list_runs(limit=1)[0]
    assert newest.metrics["acc"] == 0.9  # the later execution wins
    assert newest.metrics["loss"] == 2.0
    assert math.isnan(newest.metrics["f1"])
    assert store.get_run("new").metrics == newest.metrics  # type: ignore[union-attr]
    # Logging again replaces the earlier value instead of adding a row.
    store.record_metrics("new", e2, a2, {"acc": 0.95})
    assert store.get_run("new").metrics["acc"] == 0.95  # type: ignore[union-attr]


# -- executions, artifacts, events ------------------------------------------------------


def list_runs_text_filter(store: MetadataStore) -> None:
    add_run(store, "ab12", pipeline="Train-Model", created_at=1.0)
    add_run(store, "AB34", pipeline="eval", created_at=2.0)
    add_run(store, "cd56", pipeline="x_y%z", created_at=3.0)
    store.finish_run("ab12", state="SUCCEEDED", outputs={}, error=None, finished_at=4.0)

    def found(text: str | None, **kw: Any) -> list[str]:
        return [r.run_id for r in store.list_runs(text=text, **kw)]

    assert found(None) == found("") == ["cd56", "AB34", "ab12"]
    assert found("ab") == ["AB34", "ab12"]  # an id prefix, any case
    assert found("b1") == []  # ids match from the start only
    assert found("MODEL") == ["ab12"]  # part of the pipeline name, any case
    assert found("succ") == ["ab12"]  # part of the state
    assert found("run") == ["cd56", "AB34"]
    assert found("y%") == ["cd56"]  # LIKE wildcards are taken literally
    assert found("_") == ["cd56"]
    assert found("%") == ["cd56"]
    assert found("ab", state="RUNNING") == ["AB34"]
    assert found("ab", pipeline="eval") == ["AB34"]
    assert found("ab", limit=1, offset=1) == ["ab12"]
    assert found("nothing") == []


def executions_upsert(store: MetadataStore) -> None:
    add_run(store, "r")
    first = add_execution(
        store,
        "r",
        "train",
        "RUNNING",
        started_at=10.0,
        cache_key="k",
        component="comp-train",
        parent_dag="root",
        iteration="0",
        inputs={"lr": 0.1},
    )
    again = add_execution(
        store,
        "r",
        "train",
        "SUCCEEDED",
        started_at=10.0,
        finished_at=12.0,
        cache_key="k",
        component="comp-train",
        outputs={"acc": 1},
        attempts=2,
        log_path="/l",
        error=None,
    )
    assert first == again
    got = store.get_execution(first)
    assert got is not None
    assert (got.id, got.run_id, got.task, got.state, got.finished_at) == (
        first,
        "r",
        "train",
        "SUCCEEDED",
        12.0,
    )
    assert (got.outputs, got.attempts, got.log_path, got.inputs) == ({"acc": 1}, 2, "/l", {})
    add_execution(store, "r", "late", "RUNNING", started_at=20.0)
    add_execution(store, "r", "early", "SUCCEEDED", started_at=5.0)
    add_execution(store, "r", "skipped", "SKIPPED")
    assert [e.task for e in store.list_executions("r")] == ["early", "train", "late", "skipped"]
    assert store.get_execution(99999) is None
    with pytest.raises(NotFoundError, match="ghost"):
        add_execution(store, "ghost", "t")


def artifacts_and_events(store: MetadataStore) -> None:
    add_run(store, "r")
    e1 = add_execution(store, "r", "make")
    e2 = add_execution(store, "r", "use")
    a = add_artifact(
        store,
        "s3://b/model",
        e1,
        schema_title="system.Model",
        name="model",
        digest="sha256:1",
        size=10,
        metadata={"k": "v"},
        created_at=5.0,
    )
    # Re-recording by URI updates in place; the first producer and created_at stay.
    again = add_artifact(
        store,
        "s3://b/model",
        e2,
        schema_title="system.Model",
        name="model2",
        metadata={"k": "w"},
        created_at=9.0,
    )
    assert a == again
    art = store.get_artifact(a)
    assert art is not None
    assert (art.uri, art.name, art.schema_title, art.producer, art.created_at) == (
        "s3://b/model",
        "model2",
        "system.Model",
        e1,
        5.0,
    )
    assert (art.digest, art.size, art.metadata) == ("sha256:1", 10, {"k": "w"})
    assert store.get_artifact("s3://b/model") == art
    assert store.get_artifact(str(a)) == art
    assert store.get_artifact(f"a:{a}") == art
    assert store.get_artifact("s3://b/none") is None
    assert store.get_artifact(12345) is None

    b = add_artifact(store, "s3://b/data")
    link(store, e1, b, "INPUT", "data")
    link(store, e1, a, "OUTPUT", "model")
    link(store, e1, a, "OUTPUT", "model")  # idempotent
    link(store, e2, a, "INPUT", "model")
    pairs = store.artifacts_of(e1)
    assert [(ev.kind, ev.slot, ev.artifact_id, art.uri) for ev, art in pairs] == [
        ("INPUT", "data", b, "s3://b/data"),
        ("OUTPUT", "model", a, "s3://b/model"),
    ]
    assert pairs[0][0] == EventRecord(e1, b, "INPUT", "data", 0)
    assert store.artifacts_of(99999) == []
    # In the tree (and still a ValueError): bad arguments are never a bare ValueError.
    with pytest.raises(InvalidArgumentError, match="kind"):
        link(store, e1, a, "SIDEWAYS", "x")
    with pytest.raises(InvalidArgumentError, match="kind"):
        store.record_events([EventRecord(e1, a, "SIDEWAYS", "x")])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="numbers"):
        store.record_metrics("r1", e1, a, {"accuracy": "high"})  # type: ignore[dict-item]


def dangling_references_are_not_found(store: MetadataStore) -> None:
    add_run(store, "r")
    e = add_execution(store, "r", "t")
    a = add_artifact(store, "mem://a", e)
    with pytest.raises(NotFoundError, match="execution 999 or artifact"):
        link(store, 999, a, "INPUT", "x")
    with pytest.raises(NotFoundError, match="producer execution 999"):
        add_artifact(store, "mem://b", 999)
    with pytest.raises(NotFoundError, match="run 'ghost'"):
        store.record_metrics("ghost", e, a, {"m": 1.0})
    with pytest.raises(NotFoundError, match=r"execution 999 \(cached_from\)"):
        add_execution(store, "r", "t2", "CACHED", cached_from=999)


def json_values_that_json_cannot_hold(store: MetadataStore) -> None:
    add_run(store, "r")
    weird = {"nan": float("nan"), "inf": [float("inf")], "path": Path("/x"), "ok": 1.5}
    e = add_execution(store, "r", "t", outputs=weird)
    got = store.get_execution(e)
    assert got is not None
    assert got.outputs == {"nan": "nan", "inf": ["inf"], "path": "/x", "ok": 1.5}


def step_metrics_round_trip(store: MetadataStore) -> None:
    add_run(store, "r1")
    add_run(store, "r2")
    e1 = add_execution(store, "r1", "train")
    e2 = add_execution(store, "r2", "train")
    a1 = add_artifact(store, "mem://m1", e1, schema_title="system.Metrics")
    a2 = add_artifact(store, "mem://m2", e2, schema_title="system.Metrics")
    assert store.list_step_metrics(["r1", "r2"]) == []
    store.record_step_metrics(
        [
            # Out of step order, a NaN and an int value, a step past 32 bits.
            StepSeriesRecord("r1", e1, a1, "loss", [(1, 0.5), (0, float("nan")), (2, 1)], 3),
            StepSeriesRecord("r1", e1, a1, "acc", [(0, 0.25), (2**40, 0.75)], 5000),
        ]
    )
    store.record_step_metrics([StepSeriesRecord("r2", e2, a2, "loss", [(0, 0.9)], 1)])
    store.record_step_metrics([])
    found = store.list_step_metrics(["r2", "r1"])
    assert [(s.run_id, s.name) for s in found] == [("r2", "loss"), ("r1", "acc"), ("r1", "loss")]
    loss = found[2]
    assert (loss.execution_id, loss.artifact_id, loss.logged) == (e1, a1, 3)
    assert loss.points == [(0, None), (1, 0.5), (2, 1.0)]
    assert found[1].points == [(0, 0.25), (2**40, 0.75)] and found[1].logged == 5000
    # Logged again by the same execution beside the same artifact: replaced, not added.
    store.record_step_metrics([StepSeriesRecord("r1", e1, a1, "loss", [(0, 0.1)], 1)])
    again = store.list_step_metrics(["r1"])
    assert [(s.name, s.points) for s in again] == [("acc", found[1].points), ("loss", [(0, 0.1)])]
    with pytest.raises(InvalidArgumentError, match=r"'loss'.*not a number"):
        store.record_step_metrics([StepSeriesRecord("r1", e1, a1, "loss", [(0, "x")], 1)])  # type: ignore[list-item]
    with pytest.raises(NotFoundError):
        store.record_step_metrics([StepSeriesRecord("ghost", e1, a1, "loss", [(0, 1.0)], 1)])
    store.delete_run("r1")
    assert [s.run_id for s in store.list_step_metrics(["r1", "r2"])] == ["r2"]


# -- delete, interrupt, cache -----------------------------------------------------------


def delete_run_keeps_shared_artifacts(store: MetadataStore) -> None:
    add_run(store, "r1")
    add_run(store, "r2")
    ingest = add_execution(store, "r1", "ingest", cache_key="k-ingest")
    train = add_execution(store, "r1", "train")
    raw = add_artifact(store, "mem://raw", ingest)
    model = add_artifact(store, "mem://model", train)
    only_r1 = add_artifact(store, "mem://only-r1", train)
    external = add_artifact(store, "mem://external")  # an input nobody produced
    link(store, ingest, external, "INPUT", "src")
    link(store, ingest, raw, "OUTPUT", "raw")
    link(store, train, raw, "INPUT", "raw")
    link(store, train, model, "OUTPUT", "model")
    link(store, train, only_r1, "OUTPUT", "extra")
    store.record_metrics("r1", train, model, {"acc": 1.0})
    # r2 reuses `raw` (as input) and `model` (a cache hit's OUTPUT event).
    cached = add_execution(store, "r2", "train", "CACHED", cached_from=train)
    use = add_execution(store, "r2", "use")
    link(store, cached, model, "OUTPUT", "model")
    link(store, use, raw, "INPUT", "raw")

    deleted = store.delete_run("r1")
    # `external` was an input nobody produced and no other run used: it goes too.
    assert deleted == ["mem://external", "mem://only-r1"]
    assert store.get_run("r1") is None
    assert store.list_executions("r1") == []
    assert store.get_artifact("mem://only-r1") is None
    kept = store.get_artifact("mem://raw")
    assert kept is not None and kept.producer is None
    assert store.get_artifact("mem://model") is not None
    assert store.get_execution(cached).cached_from is None  # type: ignore[union-attr]
    assert store.find_cached("k-ingest") is None  # deleted executions are no cache hits
    assert [ev.kind for ev, _ in store.artifacts_of(cached)] == ["OUTPUT"]
    assert store.get_run("r2").metrics == {}  # type: ignore[union-attr]

    # r2 is now the last run using `raw` and `model`: they go with it.
    assert store.delete_run("r2") == ["mem://model", "mem://raw"]
    assert store.get_artifact("mem://model") is None
    assert store.get_artifact("mem://raw") is None
    with pytest.raises(NotFoundError):
        store.delete_run("r2")


def delete_run_keeps_artifacts_produced_elsewhere(store: MetadataStore) -> None:
    add_run(store, "maker")
    add_run(store, "user")
    make = add_execution(store, "maker", "make")
    use = add_execution(store, "user", "use")
    # Produced by `maker` (no event recorded), consumed by `user`.
    art = add_artifact(store, "mem://a", make)
    link(store, use, art, "INPUT", "x")
    assert store.delete_run("user") == []
    assert store.get_artifact("mem://a") is not None
    assert store.delete_run("maker") == ["mem://a"]


def mark_interrupted(store: MetadataStore) -> None:
    add_run(store, "r")
    running = add_execution(store, "r", "slow", "RUNNING", started_at=1.0)
    done = add_execution(store, "r", "fast", "SUCCEEDED", finished_at=2.0)
    store.mark_interrupted("r", finished_at=50.0)
    run = store.get_run("r")
    assert run is not None and (run.state, run.finished_at) == ("INTERRUPTED", 50.0)
    failed = store.get_execution(running)
    assert failed is not None and (failed.state, failed.finished_at) == ("FAILED", 50.0)
    assert failed.error == {
        "error_type": "Interrupted",
        "message": "the engine stopped before the task finished",
    }
    assert store.get_execution(done).state == "SUCCEEDED"  # type: ignore[union-attr]
    # A run that is no longer RUNNING is left as it is.
    store.finish_run("r", state="FAILED", outputs={}, error=None, finished_at=60.0)
    store.mark_interrupted("r", finished_at=70.0)
    assert store.get_run("r").state == "FAILED"  # type: ignore[union-attr]
    with pytest.raises(NotFoundError):
        store.mark_interrupted("nope", finished_at=1.0)


def claim_run_is_conditional(store: MetadataStore) -> None:
    add_run(store, "r")  # RUNNING under engine 42@host
    with pytest.raises(RunClaimedError, match="42@host"):
        store.claim_run("r", engine_host="other", engine_pid=7)
    store.finish_run("r", state="FAILED", outputs={}, error={"m": "x"}, finished_at=60.0)
    store.claim_run("r", engine_host="other", engine_pid=7)
    run = store.get_run("r")
    assert run is not None
    assert (run.state, run.finished_at, run.error) == ("RUNNING", None, None)
    assert (run.engine_host, run.engine_pid) == ("other", 7)
    # A second claimer is refused and told who holds the run, whatever host it is on.
    for host, pid in (("third", 8), ("other", 7)):
        with pytest.raises(RunClaimedError, match="7@other"):
            store.claim_run("r", engine_host=host, engine_pid=pid)
    # The engine a reconciler found dead (42@host) no longer holds the run: left alone.
    store.mark_interrupted("r", finished_at=70.0, engine_host="host", engine_pid=42)
    assert store.get_run("r").state == "RUNNING"  # type: ignore[union-attr]
    store.mark_interrupted("r", finished_at=70.0, engine_host="other", engine_pid=7)
    assert store.get_run("r").state == "INTERRUPTED"  # type: ignore[union-attr]
    store.claim_run("r", engine_host="third", engine_pid=8)
    store.finish_run("r", state="SUCCEEDED", outputs={}, error=None, finished_at=80.0)
    with pytest.raises(UserError, match="already succeeded") as info:
        store.claim_run("r", engine_host="fourth", engine_pid=9)
    assert not isinstance(info.value, RunClaimedError)
    with pytest.raises(NotFoundError, match="nope"):
        store.claim_run("nope", engine_host="h", engine_pid=1)


def find_cached_and_clear(store: MetadataStore) -> None:
    add_run(store, "r1")
    add_run(store, "r2")
    old = add_execution(store, "r1", "a", "SUCCEEDED", cache_key="k", finished_at=10.0)
    new = add_execution(store, "r2", "a", "SUCCEEDED", cache_key="k", finished_at=20.0)
    add_execution(store, "r2", "b", "CACHED", cache_key="k", finished_at=30.0, cached_from=new)
    add_execution(store, "r2", "c", "FAILED", cache_key="k", finished_at=40.0)
    add_execution(store, "r1", "d", "CACHED", cache_key="only-cached")
    add_execution(store, "r1", "e", "FAILED", cache_key="only-failed")
    hit = store.find_cached("k")
    assert hit is not None and hit.id == new and hit.state == "SUCCEEDED"
    assert store.find_cached("only-cached") is None
    assert store.find_cached("only-failed") is None
    assert store.find_cached("") is None
    assert store.clear_cache() == 6
    assert store.find_cached("k") is None
    assert store.get_execution(old) is not None  # executions stay
    assert store.clear_cache() == 0


# -- lineage ----------------------------------------------------------------------------


def lineage_graph(store: MetadataStore) -> dict[str, int]:
    """Two runs: A ingests raw, trains a model on it, evaluates model+raw into metrics;
    B reuses A's ingest through the cache and trains model2 on raw."""
    add_run(store, "A", pipeline="train-pipe")
    add_run(store, "B", pipeline="train-pipe")
    store.finish_run("A", state="SUCCEEDED", outputs={}, error=None, finished_at=1.0)
    ids: dict[str, int] = {}
    ids["ingest"] = add_execution(store, "A", "ingest", component="comp-ingest", inputs={"n": 3})
    ids["train"] = add_execution(store, "A", "train", component="comp-train")
    ids["eval"] = add_execution(store, "A", "eval")
    ids["ingest_b"] = add_execution(store, "B", "ingest", "CACHED", cached_from=ids["ingest"])
    ids["train_b"] = add_execution(store, "B", "train")
    ids["raw"] = add_artifact(
        store, "mem://raw", ids["ingest"], schema_title="system.Dataset", name="raw", digest="d-raw"
    )
    ids["model"] = add_artifact(
        store, "mem://model", ids["train"], schema_title="system.Model", name="model"
    )
    ids["metrics"] = add_artifact(
        store, "mem://metrics", ids["eval"], schema_title="system.Metrics"
    )
    ids["model_b"] = add_artifact(store, "mem://model-b", ids["train_b"])
    link(store, ids["ingest"], ids["raw"], "OUTPUT", "out")
    link(store, ids["train"], ids["raw"], "INPUT", "data")
    link(store, ids["train"], ids["model"], "OUTPUT", "model")
    link(store, ids["eval"], ids["model"], "INPUT", "model")
    link(store, ids["eval"], ids["raw"], "INPUT", "data")
    link(store, ids["eval"], ids["metrics"], "OUTPUT", "metrics")
    link(store, ids["ingest_b"], ids["raw"], "OUTPUT", "out")
    link(store, ids["train_b"], ids["raw"], "INPUT", "data")
    link(store, ids["train_b"], ids["model_b"], "OUTPUT", "model")
    return ids


def _ids(graph: Any, kind: str) -> set[str]:
    return {n["id"] for n in graph.nodes if n["kind"] == kind}


def lineage_upstream_multi_hop(store: MetadataStore) -> None:
    i = lineage_graph(store)
    g = store.lineage(i["metrics"], direction="upstream")
    e, a = (
        (lambda *names: {f"e:{i[n]}" for n in names}),
        (lambda *names: {f"a:{i[n]}" for n in names}),
    )
    assert _ids(g, "artifact") == a("metrics", "model", "raw")
    # raw's producers: the ingest that made it and the cache hit that re-published it.
    assert _ids(g, "execution") == e("eval", "train", "ingest", "ingest_b")
    assert _ids(g, "run") == {"r:A", "r:B"}
    assert g.nodes[0]["id"] == f"a:{i['metrics']}"  # the start comes first
    edges = {(x["from"], x["to"], x["kind"], x["slot"]) for x in g.edges}
    assert (f"e:{i['eval']}", f"a:{i['metrics']}", "OUTPUT", "metrics") in edges
    assert (f"a:{i['model']}", f"e:{i['eval']}", "INPUT", "model") in edges
    assert (f"a:{i['raw']}", f"e:{i['train']}", "INPUT", "data") in edges
    assert ("r:A", f"e:{i['train']}", "RUN", "") in edges
    assert ("r:B", f"e:{i['ingest_b']}", "RUN", "") in edges
    assert not any(x[1] == f"a:{i['model_b']}" for x in edges)
    # Same answer from the URI and from the id as a string.
    assert store.lineage("mem://metrics", direction="upstream") == g
    assert store.lineage(str(i["metrics"]), direction="upstream") == g


def lineage_depth_limits(store: MetadataStore) -> None:
    i = lineage_graph(store)
    e, a = (
        (lambda *names: {f"e:{i[n]}" for n in names}),
        (lambda *names: {f"a:{i[n]}" for n in names}),
    )
    g0 = store.lineage(i["metrics"], direction="upstream", depth=0)
    assert [n["id"] for n in g0.nodes] == [f"a:{i['metrics']}"] and g0.edges == []
    g1 = store.lineage(i["metrics"], direction="upstream", depth=1)
    assert _ids(g1, "execution") == e("eval")
    assert _ids(g1, "artifact") == a("metrics", "model", "raw")
    g2 = store.lineage(i["metrics"], direction="upstream", depth=2)
    assert _ids(g2, "execution") == e("eval", "train", "ingest", "ingest_b")
    # From an execution, depth 1 is the execution and its own artifacts.
    ge = store.lineage(f"e:{i['train']}", direction="upstream", depth=1)
    assert _ids(ge, "execution") == e("train") and _ids(ge, "artifact") == a("raw")
    ge0 = store.lineage(f"e:{i['train']}", direction="both", depth=0)
    assert _ids(ge0, "execution") == e("train") and _ids(ge0, "artifact") == set()
    assert [x["kind"] for x in ge0.edges] == ["RUN"]


def lineage_downstream_and_both(store: MetadataStore) -> None:
    i = lineage_graph(store)
    e, a = (
        (lambda *names: {f"e:{i[n]}" for n in names}),
        (lambda *names: {f"a:{i[n]}" for n in names}),
    )
    down = store.lineage("mem://raw", direction="downstream", depth=1)
    assert _ids(down, "execution") == e("train", "eval", "train_b")
    assert _ids(down, "artifact") == a("raw", "model", "metrics", "model_b")
    edges = {(x["from"], x["to"], x["kind"]) for x in down.edges}
    assert (f"a:{i['model']}", f"e:{i['eval']}", "INPUT") not in edges  # a second hop
    deeper = store.lineage("mem://raw", direction="downstream", depth=2)
    edges = {(x["from"], x["to"], x["kind"]) for x in deeper.edges}
    assert (f"a:{i['model']}", f"e:{i['eval']}", "INPUT") in edges
    both = store.lineage(i["model"], direction="both")
    assert _ids(both, "execution") == e("train", "ingest", "ingest_b", "eval")
    assert _ids(both, "artifact") == a("model", "raw", "metrics")  # not B's model
    from_exec = store.lineage(f"e:{i['train']}")
    assert _ids(from_exec, "artifact") == a("raw", "model", "metrics")


def lineage_node_shapes(store: MetadataStore) -> None:
    i = lineage_graph(store)
    g = store.lineage(i["model"], direction="upstream")
    nodes = {n["id"]: n for n in g.nodes}
    assert nodes[f"a:{i['raw']}"] == {
        "id": f"a:{i['raw']}",
        "kind": "artifact",
        "uri": "mem://raw",
        "name": "raw",
        "schema_title": "system.Dataset",
        "digest": "d-raw",
    }
    assert nodes[f"e:{i['ingest']}"] == {
        "id": f"e:{i['ingest']}",
        "kind": "execution",
        "task": "ingest",
        "run_id": "A",
        "state": "SUCCEEDED",
        "inputs": {"n": 3},
        "component": "comp-ingest",
    }
    assert nodes["r:A"] == {
        "id": "r:A",
        "kind": "run",
        "pipeline": "train-pipe",
        "state": "SUCCEEDED",
    }
    assert nodes["r:B"]["state"] == "RUNNING"
    for edge in g.edges:
        assert set(edge) == {"from", "to", "kind", "slot"}
        assert edge["from"] in nodes and edge["to"] in nodes
        assert edge["kind"] in ("INPUT", "OUTPUT", "RUN")
    assert len({tuple(x.values()) for x in g.edges}) == len(g.edges)  # no duplicates
    assert len(nodes) == len(g.nodes)


def lineage_unknown_refs(store: MetadataStore) -> None:
    lineage_graph(store)
    for ref in (9999, "9999", "mem://nothing", "e:9999", "a:9999"):
        with pytest.raises(NotFoundError, match="no artifact or execution"):
            store.lineage(ref)
    with pytest.raises(InvalidArgumentError, match="direction"):
        store.lineage("mem://raw", direction="sideways")  # type: ignore[arg-type]


SCENARIOS: dict[str, Callable[[MetadataStore], object]] = {
    f.__name__: f
    for f in (
        runs_round_trip,
        pipeline_versions_are_shared,
        run_id_prefixes,
        list_runs_order_filters_metrics,
        list_runs_text_filter,
        executions_upsert,
        artifacts_and_events,
        dangling_references_are_not_found,
        json_values_that_json_cannot_hold,
        step_metrics_round_trip,
        delete_run_keeps_shared_artifacts,
        delete_run_keeps_artifacts_produced_elsewhere,
        mark_interrupted,
        claim_run_is_conditional,
        find_cached_and_clear,
        lineage_upstream_multi_hop,
        lineage_depth_limits,
        lineage_downstream_and_both,
        lineage_node_shapes,
        lineage_unknown_refs,
    )
}


#: A process that opens the store at argv[1] at time argv[3] and records run-<argv[2]> with
#: 50 executions, printing their ids as JSON (for concurrency tests).
WRITER_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from headwater.metadata import open_store
    from headwater.metadata.base import ExecutionRecord, RunRecord

    url, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    while time.time() < start:  # all processes open the new database at once
        time.sleep(0.001)
    store = open_store(url)
    run_id = f"run-{n}"
    store.create_run(RunRecord(run_id, "p", "v", "RUNNING"), ir={"n": 1})
    ids = [
        store.record_execution(ExecutionRecord(run_id, f"task-{i}", "SUCCEEDED", cache_key=f"k{i}"))
        for i in range(50)
    ]
    store.finish_run(run_id, state="SUCCEEDED", outputs={}, error=None, finished_at=time.time())
    store.close()
    print(json.dumps(ids))
    """
)


def run_writers(url: str, count: int, tmp_path: Path, source: str = WRITER_SCRIPT) -> list[int]:
    """Start `count` writer processes (`source`: argv is url, n, start time; prints a JSON
    list of ids) that write to `url` from the same moment; their ids."""
    script = tmp_path / "writer.py"
    script.write_text(source)
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(n), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    results = [p.communicate(timeout=100) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    return [i for out, _ in results for i in json.loads(out)]


#: A process that opens the store at argv[1], waits until time argv[3] and claims run argv[2]
#: as engine <its pid>@claimer; prints "claimed" or the RunClaimedError's message.
CLAIM_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from headwater.errors import RunClaimedError
    from headwater.metadata import open_store

    url, run_id, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = open_store(url)
    while time.time() < start:  # every process claims at the same moment
        time.sleep(0.001)
    try:
        store.claim_run(run_id, engine_host="claimer", engine_pid=os.getpid())
        print("claimed")
    except RunClaimedError as exc:
        print(exc)
    store.close()
    """
)


def run_claimers(url: str, run_id: str, count: int, tmp_path: Path) -> dict[int, str]:
    """`count` processes claim `run_id` at one moment; each one's pid and what it printed."""
    script = tmp_path / "claimer.py"
    script.write_text(CLAIM_SCRIPT)
    start = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, run_id, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    results = [p.communicate(timeout=100) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    return {p.pid: out.strip() for p, (out, _) in zip(procs, results, strict=True)}


def exactly_one_claims(said: dict[int, str], store: MetadataStore, run_id: str) -> None:
    """Exactly one claimer got the run; each other was told that one's pid@host."""
    winners = [pid for pid, text in said.items() if text == "claimed"]
    assert len(winners) == 1, said
    run = store.get_run(run_id)
    assert run is not None and (run.state, run.engine_pid) == ("RUNNING", winners[0])
    for pid, text in said.items():
        if pid != winners[0]:
            assert f"{winners[0]}@claimer" in text, said
