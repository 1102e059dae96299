"""The store's experiments, named pipelines, versions, recurring runs and run queue: scenarios
that hold on every database. Run on SQLite here (test_catalog.py) and on PostgreSQL by
tests/integration/test_server_postgres.py."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from headwater.errors import ConflictError, NotFoundError, RunClaimedError
from headwater.metadata.base import (
    ExperimentRecord,
    MetadataStore,
    PipelineRecord,
    Predicate,
    RecurringRunRecord,
    RunRecord,
    VersionRecord,
)
from headwater.server.kfp.wire import ListSpec, list_page

IR: dict[str, Any] = {"pipelineInfo": {"name": "p"}, "root": {}, "schemaVersion": "2.1.0"}
RUNS = ListSpec("run_id", ("created_at", "display_name"), ("display_name", "state"))


def _experiment(store: MetadataStore, name: str, namespace: str = "") -> ExperimentRecord:
    return store.create_experiment(
        ExperimentRecord(str(uuid.uuid4()), name, "", namespace, "AVAILABLE", time.time())
    )


def _queued(store: MetadataStore, name: str, **values: Any) -> RunRecord:
    run = RunRecord(
        str(uuid.uuid4()), "p", "", "QUEUED", display_name=name, parameters={"x": 1}, **values
    )
    store.create_run(run, ir=IR)
    found = store.get_run(run.run_id)
    assert found is not None
    return found


def _version(pipeline_id: str | None, name: str, ir: dict[str, Any] = IR) -> VersionRecord:
    return VersionRecord(str(uuid.uuid4()), pipeline_id, "p", "d1", name, "", dict(ir), time.time())


def experiments_are_unique_per_namespace(store: MetadataStore) -> None:
    made = _experiment(store, "e", "ns-a")
    _experiment(store, "e", "ns-b")
    with pytest.raises(ConflictError):
        _experiment(store, "e", "ns-a")
    assert store.experiment_named("e", "ns-a") == made


def a_page_of_runs_sorts_filters_and_counts(store: MetadataStore) -> None:
    exp = _experiment(store, "runs")
    for i in range(5):
        _queued(store, f"run-{i}", experiment_id=exp.experiment_id, namespace="ns" * (i % 2))
    page = list_page({"page_size": "2", "sort_by": "display_name desc"}, RUNS)
    rows, total = store.page("runs", page)
    assert total == 5 and [r.display_name for r in rows] == ["run-4", "run-3"]
    assert rows[0].experiment == "runs" and rows[0].parameters == {"x": 1}
    query = {
        "filter": '{"predicates":[{"operation":"IN","key":"name","string_values":'
        '{"values":["run-1","run-2"]}},{"operation":1,"key":"state","stringValue":"PENDING"}]}'
    }
    rows, total = store.page("runs", list_page(query, RUNS, Predicate("namespace", "EQUALS", "ns")))
    assert total == 1 and rows[0].display_name == "run-1" and rows[0].state == "QUEUED"
    # The runs search finds runs by their experiment's name (and their own) too.
    assert len(store.list_runs(text="RUNS")) == 5
    assert [r.display_name for r in store.list_runs(text="n-3")] == ["run-3"]
    # IS_SUBSTRING ignores case on every database, and % and _ in it are plain characters.
    for text, matches in (("RUN-", 5), ("uN-3", 1), ("%", 0), ("n_", 0)):
        predicate = f'{{"operation":"IS_SUBSTRING","key":"name","string_value":"{text}"}}'
        page = list_page({"filter": f'{{"predicates":[{predicate}]}}'}, RUNS)
        assert store.page("runs", page)[1] == matches, text


def one_worker_takes_a_queued_run(store: MetadataStore) -> None:
    run = _queued(store, "r")
    wins: list[int] = []
    errors: list[BaseException] = []

    def claim(pid: int) -> None:
        try:
            store.claim_run(run.run_id, engine_host="h", engine_pid=pid, queued=True)
            wins.append(pid)
        except RunClaimedError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(100 + i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(errors) == 5
    taken = store.get_run(run.run_id)
    assert taken is not None and (taken.state, taken.starts, taken.engine_pid) == (
        "RUNNING",
        1,
        wins[0],
    )
    assert taken.scheduled_at is not None
    assert [r.run_id for r in store.queue_runs(states=("RUNNING",))] == [run.run_id]


def a_cancel_ends_canceled_unless_the_run_succeeded(store: MetadataStore) -> None:
    for ended, shown in (
        ("FAILED", "CANCELED"),
        ("INTERRUPTED", "CANCELED"),
        ("SUCCEEDED", "SUCCEEDED"),
    ):
        run = _queued(store, ended)
        store.claim_run(run.run_id, engine_host="h", engine_pid=1, queued=True)
        assert store.transition_run(run.run_id, source=("RUNNING",), to="CANCELING")
        assert not store.transition_run(run.run_id, source=("RUNNING",), to="CANCELING")
        store.finish_run(run.run_id, state=ended, outputs={}, error=None, finished_at=time.time())
        found = store.get_run(run.run_id)
        assert found is not None and found.state == shown
    dead = _queued(store, "engine died while canceling")
    store.claim_run(dead.run_id, engine_host="h", engine_pid=2, queued=True)
    store.transition_run(dead.run_id, source=("RUNNING",), to="CANCELING")
    store.mark_interrupted(dead.run_id, finished_at=time.time(), engine_host="h", engine_pid=2)
    found = store.get_run(dead.run_id)
    assert found is not None and found.state == "CANCELED"


def a_run_is_ended_only_by_the_worker_holding_its_lease(store: MetadataStore) -> None:
    now = time.time()
    run = _queued(store, "leased")
    store.claim_run(run.run_id, engine_host="h", engine_pid=1, queued=True, lease_until=now + 30)
    renew = store.renew_lease
    assert renew(run.run_id, engine_host="h", engine_pid=1, lease_until=now + 60) == "RUNNING"
    assert renew(run.run_id, engine_host="h", engine_pid=2, lease_until=now + 90) is None
    held = store.get_run(run.run_id)
    assert held is not None and held.lease_until == now + 60
    # A server that saw the lease lapse before the renewal leaves the run alone; past it, not.
    store.mark_interrupted(run.run_id, finished_at=now, lapsed_before=now + 59)
    held = store.get_run(run.run_id)
    assert held is not None and held.state == "RUNNING"
    store.mark_interrupted(run.run_id, finished_at=now, lapsed_before=now + 61)
    assert renew(run.run_id, engine_host="h", engine_pid=1, lease_until=now + 90) is None
    # Requeued and taken by another worker: the first one's end writes nothing.
    assert store.transition_run(run.run_id, source=("INTERRUPTED",), to="QUEUED")
    store.claim_run(run.run_id, engine_host="g", engine_pid=7, queued=True, lease_until=now + 30)
    for host, pid, state in (("h", 1, "FAILED"), ("g", 7, "SUCCEEDED"), ("g", 7, "FAILED")):
        store.finish_run(
            run.run_id,
            state=state,
            outputs={},
            error=None,
            finished_at=now,
            engine_host=host,
            engine_pid=pid,
        )
    ended = store.get_run(run.run_id)
    assert ended is not None and (ended.state, ended.starts) == ("SUCCEEDED", 2)
    assert renew(run.run_id, engine_host="g", engine_pid=7, lease_until=now) == "SUCCEEDED"
    with pytest.raises(NotFoundError):
        store.finish_run(
            "no-such-run",
            state="FAILED",
            outputs={},
            error=None,
            finished_at=now,
            engine_host="g",
            engine_pid=7,
        )


def archiving_an_experiment_archives_its_runs(store: MetadataStore) -> None:
    exp = _experiment(store, "arch")
    run = _queued(store, "r", experiment_id=exp.experiment_id)
    store.set_experiment_storage(exp.experiment_id, "ARCHIVED")
    found = store.get_run(run.run_id)
    assert found is not None and found.storage_state == "ARCHIVED"
    assert store.experiment_summaries([exp.experiment_id])[exp.experiment_id]["runs"] == 1
    store.delete_experiment(exp.experiment_id)
    assert store.get_experiment(exp.experiment_id) is None
    kept = store.get_run(run.run_id)  # the run stays, in no experiment
    assert kept is not None and kept.experiment_id is None
    with pytest.raises(NotFoundError):
        store.delete_experiment(exp.experiment_id)


def versions_keep_their_runs_when_taken_off(store: MetadataStore) -> None:
    pipeline = PipelineRecord(str(uuid.uuid4()), "named", "", "", time.time())
    first = _version(pipeline.pipeline_id, "v1")
    store.create_pipeline(pipeline, first)
    with pytest.raises(ConflictError):
        store.create_version(_version(pipeline.pipeline_id, "v1"))
    second = store.create_version(_version(pipeline.pipeline_id, "v2", {**IR, "v": 2}))
    latest = store.latest_version(pipeline.pipeline_id)
    assert latest is not None and latest.pipeline_version_id == second.pipeline_version_id
    run = _queued(store, "uses v1", pipeline_version_id=first.pipeline_version_id)
    assert (run.pipeline_id, run.version_name) == (pipeline.pipeline_id, "v1")
    with pytest.raises(ConflictError):
        store.delete_pipeline(pipeline.pipeline_id, cascade=False)
    store.delete_pipeline(pipeline.pipeline_id, cascade=True)
    assert store.get_pipeline(pipeline.pipeline_id) is None
    assert store.get_version(second.pipeline_version_id) is None  # nothing pointed to it
    kept = store.get_run(run.run_id)
    assert kept is not None and kept.pipeline_id is None  # its version, no longer uploaded
    assert store.get_pipeline_ir(run.run_id) == IR


def a_pipeline_is_never_left_without_the_version_it_was_uploaded_with(
    store: MetadataStore,
) -> None:
    pipeline = PipelineRecord(str(uuid.uuid4()), "half-uploaded", "", "", time.time())
    broken = _version(pipeline.pipeline_id, "v1")
    broken.display_name = None  # type: ignore[assignment]  # NOT NULL: the insert fails
    with pytest.raises(Exception):  # noqa: B017 - whatever the driver raises
        store.create_pipeline(pipeline, broken)
    assert store.pipeline_named("half-uploaded", "") is None  # the name is free again
    store.create_pipeline(pipeline, _version(pipeline.pipeline_id, "v1"))


def a_version_taken_off_merges_into_its_unuploaded_twin(store: MetadataStore) -> None:
    cli = _queued(store, "recorded by a run")  # the unuploaded version of IR
    pipeline = PipelineRecord(str(uuid.uuid4()), "named", "", "", time.time())
    raw = store.get_version(cli.pipeline_version_id)
    assert raw is not None
    twin = VersionRecord(
        str(uuid.uuid4()), pipeline.pipeline_id, "p", raw.digest, "v1", "", IR, time.time()
    )
    store.create_pipeline(pipeline, twin)
    run = _queued(store, "uses v1", pipeline_version_id=twin.pipeline_version_id)
    store.delete_version(twin.pipeline_version_id)
    moved = store.get_run(run.run_id)
    assert moved is not None and moved.pipeline_version_id == cli.pipeline_version_id
    assert store.get_version(twin.pipeline_version_id) is None


def recurring_runs_fire_once_per_time(store: MetadataStore) -> None:
    version = store.create_version(_version(None, ""))
    again = store.create_version(_version(None, ""))  # the same IR: the same version
    assert again.pipeline_version_id == version.pipeline_version_id
    rec = RecurringRunRecord(
        str(uuid.uuid4()), "nightly", version.pipeline_version_id, {"cron": "x"},
        next_fire_at=100.0, created_at=1.0, updated_at=1.0,
    )  # fmt: skip
    store.create_recurring_run(rec)
    assert [r.recurring_run_id for r in store.due_recurring_runs(100.0)] == [rec.recurring_run_id]
    assert store.due_recurring_runs(99.0) == []
    assert store.update_recurring_run(rec.recurring_run_id, next_was=100.0, next_fire_at=200.0)
    assert not store.update_recurring_run(rec.recurring_run_id, next_was=100.0, next_fire_at=300.0)
    found = store.get_recurring_run(rec.recurring_run_id)
    assert found is not None and found.next_fire_at == 200.0
    store.delete_recurring_run(rec.recurring_run_id)
    with pytest.raises(NotFoundError):
        store.delete_recurring_run(rec.recurring_run_id)


SCENARIOS: dict[str, Callable[[MetadataStore], None]] = {
    f.__name__: f
    for f in (
        experiments_are_unique_per_namespace,
        a_page_of_runs_sorts_filters_and_counts,
        one_worker_takes_a_queued_run,
        a_cancel_ends_canceled_unless_the_run_succeeded,
        a_run_is_ended_only_by_the_worker_holding_its_lease,
        archiving_an_experiment_archives_its_runs,
        versions_keep_their_runs_when_taken_off,
        a_pipeline_is_never_left_without_the_version_it_was_uploaded_with,
        a_version_taken_off_merges_into_its_unuploaded_twin,
        recurring_runs_fire_once_per_time,
    )
}
