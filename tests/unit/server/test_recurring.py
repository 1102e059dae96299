"""The scheduler's firing rule, on a real store (no worker is started: `_fire` only queues)."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.server.queue import QueueSettings, RunQueue
from headwater.server.store import KfpStore

SPEC = {"pipelineInfo": {"name": "p"}, "root": {}}


def recurring(store: KfpStore, *, no_catchup: bool, next_fire_at: float, limit: int = 10) -> str:
    exp = store.create_experiment("e", "", "")
    row = store.create_recurring_run(
        {
            "experiment_id": exp["experiment_id"],
            "namespace": "",
            "display_name": "r",
            "description": "",
            "pipeline_spec": SPEC,
            "pipeline_id": None,
            "pipeline_version_id": None,
            "runtime_config": {},
            "trigger": {"periodic_schedule": {"interval_second": "10"}},
            "max_concurrency": limit,
            "no_catchup": int(no_catchup),
            "status": "ENABLED",
            "next_fire_at": next_fire_at,
        }
    )
    return str(row["recurring_run_id"])


@pytest.fixture
def store(tmp_path: Path) -> KfpStore:
    return KfpStore(f"sqlite:///{tmp_path / 'md.db'}")


def fired(store: KfpStore) -> list[float]:
    return sorted(r["scheduled_at"] for r in store.runs_in(("PENDING",)))


@pytest.mark.parametrize(
    ("no_catchup", "expected", "following"),
    [(False, [0, 10, 20, 30], 1040.0), (True, [0], 1045.0)],  # no catch-up: an interval from now
    ids=["catchup", "no-catchup"],
)
def test_after_downtime_missed_times_fire_unless_no_catchup(
    store: KfpStore, no_catchup: bool, expected: list[float], following: float
) -> None:
    queue = RunQueue(store, QueueSettings(metadata_url="unused"))
    rid = recurring(store, no_catchup=no_catchup, next_fire_at=1000.0)
    for _ in range(6):  # the server was down from 1000 to 1035
        queue._fire(1035.0)
    assert fired(store) == [1000.0 + t for t in expected]
    assert store.recurring_run(rid)["next_fire_at"] == following


def test_max_concurrency_holds_the_next_time_back(store: KfpStore) -> None:
    queue = RunQueue(store, QueueSettings(metadata_url="unused"))
    rid = recurring(store, no_catchup=False, next_fire_at=1000.0, limit=1)
    queue._fire(1035.0)
    queue._fire(1035.0)
    assert fired(store) == [1000.0]  # one queued: the next waits for it
    store.update_run(store.runs_in(("PENDING",))[0]["run_id"], state="SUCCEEDED")
    queue._fire(1035.0)
    assert store.recurring_run(rid)["next_fire_at"] == 1020.0
