"""The scheduler's firing rule, on a real store (no worker is started: `_fire` only queues)."""

import time
import uuid
from pathlib import Path

import pytest
import yaml
from kfp import compiler, dsl

from headwater.metadata.base import ExperimentRecord, RecurringRunRecord, VersionRecord
from headwater.metadata.encoding import ir_digest
from headwater.metadata.sql import SqlMetadataStore
from headwater.server.operations import RunOperations
from headwater.server.queue import QueueSettings, RunQueue


@dsl.component(base_image="python:3.11")
def echo(x: int) -> int:
    return x


@dsl.pipeline(name="tick")
def tick(x: int = 1) -> None:
    echo(x=x)


def recurring(
    store: SqlMetadataStore, ir: dict, *, no_catchup: bool, next_fire_at: float, limit: int = 10
) -> str:
    exp = store.create_experiment(ExperimentRecord(str(uuid.uuid4()), "e", created_at=1.0))
    version = store.create_version(
        VersionRecord(str(uuid.uuid4()), None, "tick", ir_digest(ir), ir=ir, created_at=1.0)
    )
    row = store.create_recurring_run(
        RecurringRunRecord(
            recurring_run_id=str(uuid.uuid4()),
            display_name="r",
            pipeline_version_id=version.pipeline_version_id,
            trigger={"periodic_schedule": {"interval_second": "10"}},
            runtime_config={"parameters": {"x": 2}},
            experiment_id=exp.experiment_id,
            max_concurrency=limit,
            no_catchup=no_catchup,
            next_fire_at=next_fire_at,
            created_at=1.0,
            updated_at=1.0,
        )
    )
    return row.recurring_run_id


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlMetadataStore:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    return SqlMetadataStore(f"sqlite:///{tmp_path / 'md.db'}")


@pytest.fixture(scope="module")
def ir(tmp_path_factory: pytest.TempPathFactory) -> dict:
    path = tmp_path_factory.mktemp("ir") / "tick.yaml"
    compiler.Compiler().compile(tick, str(path))
    return dict(yaml.safe_load(path.read_text()))


def queue_over(store: SqlMetadataStore) -> RunQueue:
    return RunQueue(store, RunOperations(store), QueueSettings(metadata_url="unused"))


def fired(store: SqlMetadataStore) -> list[float]:
    return sorted(r.scheduled_at or 0 for r in store.queue_runs(states=("QUEUED",)))


@pytest.mark.parametrize(
    ("no_catchup", "expected", "following"),
    # No catch-up: one run, for the latest missed time; the next an interval from now.
    [(False, [0, 10, 20, 30], 1040.0), (True, [30], 1045.0)],
    ids=["catchup", "no-catchup"],
)
def test_after_downtime_missed_times_fire_unless_no_catchup(
    store: SqlMetadataStore, ir: dict, no_catchup: bool, expected: list[float], following: float
) -> None:
    queue = queue_over(store)
    rid = recurring(store, ir, no_catchup=no_catchup, next_fire_at=1000.0)
    for _ in range(6):  # the server was down from 1000 to 1035
        queue._fire(1035.0)
    assert fired(store) == [1000.0 + t for t in expected]
    found = store.get_recurring_run(rid)
    assert found is not None and found.next_fire_at == following
    runs = store.list_runs(recurring_run_id=rid)
    assert {(r.parameters["x"], r.experiment, r.state) for r in runs} == {(2, "e", "QUEUED")}


def test_max_concurrency_holds_the_next_time_back(store: SqlMetadataStore, ir: dict) -> None:
    queue = queue_over(store)
    rid = recurring(store, ir, no_catchup=False, next_fire_at=1000.0, limit=1)
    queue._fire(1035.0)
    queue._fire(1035.0)
    assert fired(store) == [1000.0]  # one queued: the next waits for it
    [run] = store.queue_runs(states=("QUEUED",))
    store.transition_run(run.run_id, source=("QUEUED",), to="SUCCEEDED", finished_at=time.time())
    queue._fire(1035.0)
    found = store.get_recurring_run(rid)
    assert found is not None and found.next_fire_at == 1020.0
