"""`KfpStore` scenarios that hold on every database: run on SQLite here (test_kfp_store.py) and on
PostgreSQL by tests/integration/test_server_postgres.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from headwater.metadata.schema import KFP_EXPERIMENTS, KFP_RUNS
from headwater.server.store import KfpStore
from headwater.server.wire import ApiError, list_query

SPEC: dict[str, Any] = {"pipelineInfo": {"name": "p"}, "root": {}, "schemaVersion": "2.1.0"}


def _run(store: KfpStore, experiment_id: str, name: str, namespace: str = "") -> dict[str, Any]:
    return store.create_run(
        {
            "experiment_id": experiment_id,
            "namespace": namespace,
            "display_name": name,
            "description": "",
            "pipeline_spec": SPEC,
            "pipeline_id": None,
            "pipeline_version_id": None,
            "runtime_config": {"parameters": {"x": 1}},
        }
    )


def experiments_are_unique_per_namespace(store: KfpStore) -> None:
    made = store.create_experiment("e", "", "ns-a")
    store.create_experiment("e", "", "ns-b")
    with pytest.raises(ApiError) as caught:
        store.create_experiment("e", "", "ns-a")
    assert caught.value.status == 409
    assert store.experiment_named("e", "ns-a") == made
    assert store.default_experiment("ns-a") == store.default_experiment("ns-a")


def runs_page_sort_and_filter(store: KfpStore) -> None:
    exp = store.create_experiment("runs", "", "")
    for i in range(5):
        _run(store, exp["experiment_id"], f"run-{i}", namespace="ns" if i % 2 else "")
    query = list_query(
        {"page_size": "2", "sort_by": "display_name desc"},
        id_key="run_id",
        sort_keys=("created_at", "display_name"),
        filter_keys=("display_name",),
    )
    rows, total = store.page(KFP_RUNS, query)
    assert total == 5 and [r["display_name"] for r in rows] == ["run-4", "run-3"]
    assert query.next_token(total) == "2"
    filtered = list_query(
        {
            "filter": '{"predicates":[{"operation":"IN","key":"name","string_values":'
            '{"values":["run-1","run-2"]}}]}'
        },
        id_key="run_id",
        sort_keys=("created_at",),
        filter_keys=("display_name",),
    )
    rows, total = store.page(KFP_RUNS, filtered, KFP_RUNS.c.namespace == "ns")
    assert total == 1 and rows[0]["display_name"] == "run-1"
    assert (
        rows[0]["runtime_config"] == {"parameters": {"x": 1}} and rows[0]["pipeline_spec"] == SPEC
    )


def claims_are_compare_and_set(store: KfpStore) -> None:
    exp = store.create_experiment("claims", "", "")
    run = _run(store, exp["experiment_id"], "r")
    wins: list[bool] = []

    def claim() -> None:
        wins.append(store.update_run(run["run_id"], when=("PENDING",), state="RUNNING"))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 5 + [True]
    assert [r["run_id"] for r in store.runs_in(("RUNNING",))] == [run["run_id"]]


def archiving_an_experiment_archives_its_runs(store: KfpStore) -> None:
    exp = store.create_experiment("arch", "", "")
    run = _run(store, exp["experiment_id"], "r")
    store.set_experiment_storage(exp["experiment_id"], "ARCHIVED")
    assert store.run(run["run_id"])["storage_state"] == "ARCHIVED"
    assert store.count(KFP_EXPERIMENTS, KFP_EXPERIMENTS.c.storage_state == "ARCHIVED") == 1
    store.delete_experiment(exp["experiment_id"])
    with pytest.raises(ApiError) as caught:
        store.experiment(exp["experiment_id"])
    assert caught.value.status == 404


def versions_keep_the_spec_and_cascade(store: KfpStore) -> None:
    pipeline = store.create_pipeline("p", "", "")
    first = store.create_version(pipeline["pipeline_id"], "v1", "", SPEC)
    with pytest.raises(ApiError) as caught:
        store.create_version(pipeline["pipeline_id"], "v1", "", SPEC)
    assert caught.value.status == 409
    assert (
        store.version(pipeline["pipeline_id"], first["pipeline_version_id"])["pipeline_spec"]
        == SPEC
    )
    with pytest.raises(ApiError):
        store.delete_pipeline(pipeline["pipeline_id"], cascade=False)
    store.delete_pipeline(pipeline["pipeline_id"], cascade=True)
    with pytest.raises(ApiError):
        store.version(pipeline["pipeline_id"], first["pipeline_version_id"])


SCENARIOS: dict[str, Callable[[KfpStore], None]] = {
    f.__name__: f
    for f in (
        experiments_are_unique_per_namespace,
        runs_page_sort_and_filter,
        claims_are_compare_and_set,
        archiving_an_experiment_archives_its_runs,
        versions_keep_the_spec_and_cascade,
    )
}
