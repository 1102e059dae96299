"""The model registry's behaviour on any `MetadataStore`, as plain functions of an empty store.

`test_model_store.py` runs them on SQLite and `tests/integration/test_models_postgres.py` on
PostgreSQL, with the concurrent registrations of `run_registrars` in real processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.errors import InvalidArgumentError, NotFoundError
from headwater.metadata import (
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    MetadataStore,
    ModelRecord,
    RunRecord,
)


def add_run(store: MetadataStore, run_id: str) -> None:
    record = RunRecord(run_id, "p", "v1", "RUNNING", engine_host="h", engine_pid=1)
    store.create_run(record, ir={"pipelineInfo": {"name": "p"}})


def produced(store: MetadataStore, run_id: str, task: str, uri: str) -> int:
    """An execution of `run_id` that output the artifact at `uri`; its id."""
    execution = store.record_execution(ExecutionRecord(run_id, task, "SUCCEEDED"))
    artifact = store.record_artifact(ArtifactRecord(uri=uri, schema_title="system.Model"))
    store.record_event(EventRecord(execution, artifact, "OUTPUT", "model"))
    return execution


def register(store: MetadataStore, name: str, uri: str, **kw: object) -> ModelRecord:
    record, _ = store.register_model(ModelRecord(name=name, uri=uri, **kw))  # type: ignore[arg-type]
    return record


def versions_count_per_name(store: MetadataStore) -> None:
    a1 = register(store, "a", "/m/a1", framework="xgboost", metrics={"auc": 0.75})
    a2 = register(store, "a", "/m/a2")
    b1 = register(store, "b", "/m/b1")
    assert [(m.name, m.version) for m in (a1, a2, b1)] == [("a", 1), ("a", 2), ("b", 1)]
    assert (a1.framework, a1.metrics, a1.stage, a1.run_id) == (
        "xgboost",
        {"auc": 0.75},
        "none",
        None,
    )
    assert a1.created_at > 0 and a1.stage_changed_at == a1.created_at
    listed = store.list_models()
    assert [(m.name, m.version) for m in listed] == [("a", 2), ("a", 1), ("b", 1)]
    assert [m.version for m in store.list_models(name="a")] == [2, 1]
    assert store.list_models(name="zzz") == []
    latest = store.get_model("a")
    assert latest is not None and (latest.version, latest.uri) == (2, "/m/a2")
    first = store.get_model("a", 1)
    assert first is not None and first.metrics == {"auc": 0.75}
    assert store.get_model("a", 3) is None
    assert store.get_model("zzz") is None


def the_same_uri_is_registered_once(store: MetadataStore) -> None:
    first, new = store.register_model(ModelRecord(name="a", uri="/m/x", metrics={"v": 1}))
    again, new_again = store.register_model(ModelRecord(name="a", uri="/m/x", metrics={"v": 2}))
    assert (new, new_again) == (True, False)
    assert again == first  # the first registration, unchanged
    other, _ = store.register_model(ModelRecord(name="other", uri="/m/x"))
    assert (other.name, other.version) == ("other", 1)  # another name may hold the same URI


def production_is_exclusive_and_staging_is_not(store: MetadataStore) -> None:
    for n in range(1, 4):
        register(store, "a", f"/m/a{n}")
    register(store, "b", "/m/b1", stage="production")
    promoted, demoted = store.promote_model("a", 1, "production")
    assert (promoted.version, promoted.stage, demoted) == (1, "production", [])
    promoted, demoted = store.promote_model("a", 2, "PRODUCTION")  # stages ignore case
    assert (promoted.stage, [(m.version, m.stage) for m in demoted]) == (
        "production",
        [(1, "none")],
    )
    store.promote_model("a", 1, "staging")
    store.promote_model("a", 3, "staging")
    stages = {m.version: m.stage for m in store.list_models(name="a")}
    assert stages == {1: "staging", 2: "production", 3: "staging"}
    # Promoting the production version again demotes nothing; another name is untouched.
    assert store.promote_model("a", 2, "production")[1] == []
    b = store.get_model("b")
    assert b is not None and b.stage == "production"
    # Registering straight into production demotes too.
    a4 = register(store, "a", "/m/a4", stage="production")
    stages = {m.version: m.stage for m in store.list_models(name="a")}
    assert stages == {1: "staging", 2: "none", 3: "staging", 4: "production"}
    assert a4.stage == "production"
    back, _ = store.promote_model("a", 4, "none")
    assert back.stage == "none" and back.stage_changed_at >= back.created_at


def bad_names_versions_and_stages(store: MetadataStore) -> None:
    register(store, "a", "/m/a1")
    register(store, "b", "/m/b1")
    with pytest.raises(
        NotFoundError, match=r"model 'a' has no version 7 \(registered versions: 1\)"
    ):
        store.promote_model("a", 7, "production")
    with pytest.raises(NotFoundError, match=r"no model named 'zzz'.*registered models: a, b"):
        store.promote_model("zzz", 1, "production")
    with pytest.raises(InvalidArgumentError, match=r"stage 'prod' does not exist \(stages: none, "):
        store.promote_model("a", 1, "prod")
    with pytest.raises(InvalidArgumentError, match="stage 'live' does not exist"):
        store.register_model(ModelRecord(name="a", uri="/m/a2", stage="live"))
    with pytest.raises(InvalidArgumentError, match="needs a name and a URI"):
        store.register_model(ModelRecord(name="", uri="/m/a2"))
    assert [m.version for m in store.list_models(name="a")] == [1]  # nothing half-registered


def the_producing_run_and_execution(store: MetadataStore) -> None:
    add_run(store, "r1")
    train = produced(store, "r1", "train", "/m/trained")
    model = register(store, "a", "/m/trained", run_id="r1")
    assert (model.run_id, model.execution_id) == ("r1", train)
    # Registered before the run recorded the artifact (the engine writes asynchronously):
    # the execution is found once it is recorded.
    early = register(store, "a", "/m/later", run_id="r1")
    assert early.execution_id is None
    later = produced(store, "r1", "train-2", "/m/later")
    found = store.get_model("a", early.version)
    assert found is not None and found.execution_id == later
    with pytest.raises(NotFoundError, match="run 'nope'"):
        register(store, "a", "/m/orphan", run_id="nope")


def lineage_reaches_the_model(store: MetadataStore) -> None:
    add_run(store, "r1")
    produced(store, "r1", "train", "/m/trained")
    register(store, "churn", "/m/trained", run_id="r1", stage="staging")
    graph = store.lineage("/m/trained", direction="upstream")
    artifact = next(n for n in graph.nodes if n["kind"] == "artifact")
    assert artifact["models"] == [{"name": "churn", "version": 1, "stage": "staging"}]
    assert {n["id"] for n in graph.nodes if n["kind"] == "run"} == {"r:r1"}


def deleting_the_run_keeps_the_model_and_its_artifact(store: MetadataStore) -> None:
    add_run(store, "r1")
    produced(store, "r1", "train", "/m/trained")
    produced(store, "r1", "other", "/m/scratch")
    register(store, "a", "/m/trained", run_id="r1")
    assert store.delete_run("r1") == ["/m/scratch"]  # the model's file stays
    model = store.get_model("a")
    assert model is not None and (model.run_id, model.execution_id) == (None, None)
    assert store.get_artifact("/m/trained") is not None


def endpoints_are_recorded_by_name(store: MetadataStore) -> None:
    from headwater.metadata.base import EndpointRecord

    add_run(store, "deployer")
    assert store.list_endpoints() == [] and store.get_endpoint("churn") is None
    model = {"name": "churn", "version": "1", "registered": "churn:1"}
    first = store.save_endpoint(
        EndpointRecord(
            "churn",
            "http://127.0.0.1:9001",
            "h",
            42,
            "1234",
            models=[model],
            config={"port": 9001},
            log_path="/l",
            run_id="deployer",
        )
    )
    assert (first.url, first.pid, first.run_id, first.models) == (
        "http://127.0.0.1:9001",
        42,
        "deployer",
        [model],
    )
    assert first.created_at > 0 and first.updated_at >= first.created_at
    store.save_endpoint(EndpointRecord("alpha", "http://127.0.0.1:9002", "h", 43))
    updated = store.save_endpoint(
        EndpointRecord("churn", first.url, "h", 44, "99", models=[{**model, "version": "2"}])
    )
    # Replaced whole under its name, keeping when it was first created.
    assert (updated.pid, updated.models[0]["version"]) == (44, "2")
    assert updated.created_at == first.created_at and updated.run_id is None
    assert [e.name for e in store.list_endpoints()] == ["alpha", "churn"]
    store.save_endpoint(EndpointRecord("churn", first.url, "h", 44, run_id="deployer"))
    store.delete_run("deployer")  # the server outlives its run; the record loses the run
    kept = store.get_endpoint("churn")
    assert kept is not None and kept.run_id is None
    with pytest.raises(NotFoundError):
        store.save_endpoint(EndpointRecord("beta", "u", "h", 1, run_id="no-such-run"))


SCENARIOS: dict[str, Callable[[MetadataStore], object]] = {
    f.__name__: f
    for f in (
        versions_count_per_name,
        the_same_uri_is_registered_once,
        production_is_exclusive_and_staging_is_not,
        bad_names_versions_and_stages,
        the_producing_run_and_execution,
        lineage_reaches_the_model,
        deleting_the_run_keeps_the_model_and_its_artifact,
        endpoints_are_recorded_by_name,
    )
}


#: A process that opens the store at argv[1] and, from time argv[3], registers argv[2] models
#: named "shared" (URIs unique to the process) and promotes each to production; prints the
#: versions it got as JSON.
REGISTRAR_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, time
    from headwater.metadata import ModelRecord, open_store

    url, count, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    store = open_store(url)
    while time.time() < start:  # every process registers at the same moment
        time.sleep(0.001)
    got = []
    for n in range(count):
        model, new = store.register_model(ModelRecord("shared", f"/m/{os.getpid()}-{n}"))
        assert new
        store.promote_model("shared", model.version, "production")
        got.append(model.version)
    store.close()
    print(json.dumps(got))
    """
)


def run_registrars(url: str, processes: int, each: int, tmp_path: Path) -> list[int]:
    """`processes` processes register `each` versions of one name at once; every version."""
    script = tmp_path / "registrar.py"
    script.write_text(REGISTRAR_SCRIPT)
    start = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, str(each), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    results = [p.communicate(timeout=100) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
    return [v for out, _ in results for v in json.loads(out)]


def registrations_are_distinct(store: MetadataStore, versions: list[int]) -> None:
    """Every registration got its own version, 1..n, and exactly one is in production."""
    assert sorted(versions) == list(range(1, len(versions) + 1))
    stored = store.list_models(name="shared")
    assert sorted(m.version for m in stored) == sorted(versions)
    assert [m.stage for m in stored].count("production") == 1
