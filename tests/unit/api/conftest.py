"""A metadata store with runs in every state, in a SQLite file under a test's HEADWATER_HOME."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from headwater.metadata import ArtifactRecord, EventRecord, ExecutionRecord, RunRecord
from headwater.metadata.sql import SqlMetadataStore

IR = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}}}


class Seeded(NamedTuple):
    """The store's URL and file, and the ids the tests look for."""

    url: str
    db: Path
    model_id: int  # artifact: train -> model -> evaluate
    data_id: int  # artifact: read by train
    train_id: int  # execution


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HEADWATER_HOME in tmp_path (not created), with no store or root set elsewhere."""
    path = tmp_path / "home"
    monkeypatch.setenv("HEADWATER_HOME", str(path))
    monkeypatch.delenv("HEADWATER_METADATA_URL", raising=False)
    monkeypatch.delenv("HEADWATER_PIPELINE_ROOT", raising=False)
    return path


def _run(
    store: SqlMetadataStore, run_id: str, state: str, created: float, *, host: str, pid: int
) -> None:
    record = RunRecord(
        run_id, "p", "v1", "RUNNING", created_at=created, engine_host=host, engine_pid=pid,
        parameters={"n": 1}, pipeline_root="/tmp/root",
    )  # fmt: skip
    store.create_run(record, ir=IR)
    if state != "RUNNING":
        store.finish_run(run_id, state=state, outputs={}, error=None, finished_at=created + 2)


@pytest.fixture
def seeded(home: Path) -> Callable[..., Seeded]:
    """A factory: the default store (or one at `url`) with these runs, newest first:

    - `dead`: RUNNING, its engine on this host gone; task `work` RUNNING (reads model);
    - `abroad`: RUNNING on another host (alive as far as this host can tell);
    - `ok`: SUCCEEDED; tasks `train` (data -> model, metric acc) and `evaluate` (model ->);
    - `broken`: FAILED;
    - `old`: INTERRUPTED (recorded so by an earlier writer).
    """

    def make(url: str | None = None) -> Seeded:
        home.mkdir(exist_ok=True)
        db = home / "metadata.db"
        url = url or f"sqlite:///{db}"
        with SqlMetadataStore(url) as store:
            here = socket.gethostname()
            _run(store, "old", "INTERRUPTED", 100.0, host=here, pid=1)
            _run(store, "broken", "FAILED", 200.0, host=here, pid=1)
            _run(store, "ok", "SUCCEEDED", 300.0, host=here, pid=1)
            _run(store, "abroad", "RUNNING", 400.0, host="elsewhere", pid=dead_pid())
            _run(store, "dead", "RUNNING", 500.0, host=here, pid=dead_pid())
            train = store.record_execution(
                ExecutionRecord(run_id="ok", task="train", state="SUCCEEDED", started_at=300.0,
                                finished_at=301.5, inputs={"lr": 0.1}, cache_key="k1")
            )  # fmt: skip
            evaluate = store.record_execution(
                ExecutionRecord(run_id="ok", task="evaluate", state="SUCCEEDED", cache_key="k2")
            )
            data = store.record_artifact(ArtifactRecord(uri="/tmp/root/data", name="data"))
            model = store.record_artifact(
                ArtifactRecord(uri="/tmp/root/model", name="model", producer=train, size=3)
            )
            store.record_events(
                [
                    EventRecord(train, data, "INPUT", "data"),
                    EventRecord(train, model, "OUTPUT", "model"),
                    EventRecord(evaluate, model, "INPUT", "model"),
                ]
            )
            store.record_metrics("ok", evaluate, model, {"acc": 0.9})
            work = store.record_execution(
                ExecutionRecord(run_id="dead", task="work", state="RUNNING")
            )
            store.record_event(EventRecord(work, model, "INPUT", "model"))
            store.record_execution(ExecutionRecord(run_id="dead", task="done", state="SUCCEEDED"))
        return Seeded(url, db, model, data, train)

    return make
