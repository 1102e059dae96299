"""`SqliteWriter` writes what `SqlMetadataStore` writes: the same rows, the same JSON text,
the same errors; and a run through the CLI records itself without importing SQLAlchemy."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_scenarios import run_writers

from headwater.errors import HeadwaterError, StorageError
from headwater.metadata import (
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    RunRecord,
    SqlMetadataStore,
    open_store,
)
from headwater.metadata.base import StepSeriesRecord
from headwater.metadata.lite import SqliteWriter
from headwater.metadata.recorder import RunStores, open_run_stores

TABLES = (
    "pipeline_versions", "runs", "executions", "artifacts", "events", "metrics", "step_metrics",
)  # fmt: skip
IR = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}}, "n": [1, 2.5, None]}


def _stores(tmp_path: Path) -> tuple[SqlMetadataStore, SqliteWriter, Path, Path]:
    paths = []
    for name in ("sql", "lite"):
        path = tmp_path / f"{name}.db"
        open_store(f"sqlite:///{path}").close()
        paths.append(path)
    sql = SqlMetadataStore(f"sqlite:///{paths[0]}")
    lite = SqliteWriter(paths[1], f"sqlite:///{paths[1]}")
    return sql, lite, paths[0], paths[1]


def _rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row, a version's random id replaced by its place (each writer draws its own)."""
    with sqlite3.connect(path) as conn:
        rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}
    place = {row[0]: f"version {i}" for i, row in enumerate(rows["pipeline_versions"])}
    rows["pipeline_versions"] = [(place[r[0]], *r[1:]) for r in rows["pipeline_versions"]]
    rows["runs"] = [(r[0], place.get(r[1], r[1]), *r[2:]) for r in rows["runs"]]
    return rows


def _writes(store: Any) -> list[Any]:
    """One run's worth of writes, as the recorder makes them; returns what they returned."""
    out: list[Any] = []
    weird = {"nan": float("nan"), "inf": [float("-inf")], "path": Path("/x"), "none": None}
    run = RunRecord(
        run_id="r1",
        pipeline="p",
        pipeline_version="",  # the store digests the IR
        state="RUNNING",
        parameters={"n": 3, "s": "é", "weird": weird},
        pipeline_root="/tmp/root",
        created_at=100.5,
        engine_host="host",
        engine_pid=42,
    )
    store.create_run(run, ir=IR)
    store.create_run(RunRecord("r2", "p", "", "RUNNING", created_at=101.0), ir=IR)  # same version
    start = ExecutionRecord(run_id="r1", task="a", state="RUNNING", started_at=102.0)
    out.append(store.record_execution(start))
    with store.batch():
        done = ExecutionRecord(
            run_id="r1",
            task="a",
            state="SUCCEEDED",
            component="comp-a",
            parent_dag="root",
            iteration="0",
            inputs={"x": 1},
            outputs={"y": weird},
            cache_key="k1",
            started_at=102.0,
            finished_at=103.25,
            log_path="/logs/a.log",
            attempts=2,
            executor="local",
            worker="w1",
        )
        out.append(store.record_execution(done))
        model = ArtifactRecord(
            uri="file:///root/a/model",
            schema_title="system.Model",
            name="model",
            digest="d1",
            size=10,
            signature="s1",
            metadata={"framework": "xgboost", "nan": float("nan")},
            producer=out[-1],
            created_at=103.5,
        )
        out.append(store.record_artifact(model))
        metrics = ArtifactRecord(uri="file:///root/a/metrics", created_at=104.0)
        out.append(store.record_artifact(metrics))
        events = [
            EventRecord(out[1], out[2], "OUTPUT", "model", 0),
            EventRecord(out[1], out[3], "OUTPUT", "metrics", 0),
            EventRecord(out[1], out[2], "OUTPUT", "model", 0),  # again: skipped
        ]
        store.record_events(events)
        store.record_metrics("r1", out[1], out[3], {"acc": 0.9, "loss": float("nan")})
        store.record_metrics("r1", out[1], out[3], {"acc": 0.95})  # replaces acc only
        loss = StepSeriesRecord("r1", out[1], out[3], "loss", [(1, 0.5), (0, float("nan"))], 2)
        acc = StepSeriesRecord("r1", out[1], out[3], "acc", [(0, 0.25), (1, 1)], 9)
        store.record_step_metrics([loss, acc])
        store.record_step_metrics([StepSeriesRecord("r1", out[1], out[3], "acc", [(5, 1.0)], 1)])
        store.record_step_metrics([])
    hits = [
        ExecutionRecord(run_id="r2", task=t, state="CACHED", cached_from=out[1], cache_key="k1")
        for t in ("a", "b")
    ]
    out.append(store.insert_executions(hits))
    out.append(store.insert_executions([]))
    store.record_events([EventRecord(out[-2][0], out[2], "INPUT", "model", 1)])
    # Re-recorded: digest and size kept when not given, producer kept, metadata replaced.
    again = ArtifactRecord(uri="file:///root/a/model", name="model2", metadata={"v": 2})
    out.append(store.record_artifact(again))
    again = ArtifactRecord(uri="file:///root/a/metrics", producer=out[1], digest="d2")
    out.append(store.record_artifact(again))
    for ref in ("file:///root/a/model", out[2], str(out[3]), f"a:{out[3]}", "nowhere", 999):
        found = store.get_artifact(ref)
        out.append(None if found is None else vars(found))
    # An engine ends a run only while it holds it: not another engine's, nor one it ended.
    for pid, state in ((7, "FAILED"), (42, "SUCCEEDED"), (42, "FAILED")):
        store.finish_run(
            "r1",
            state=state,
            outputs={"Output": 1.5},
            error=None,
            finished_at=110.0,
            engine_host="host",
            engine_pid=pid,
        )
    store.finish_run(
        "r2", state="FAILED", outputs={}, error={"message": "boom", "n": 1}, finished_at=111.0
    )
    return out


def test_the_same_writes_make_the_same_rows(tmp_path: Path) -> None:
    sql, lite, sql_path, lite_path = _stores(tmp_path)
    returned_sql = _writes(sql)
    returned_lite = _writes(lite)
    sql.close()
    lite.close()
    assert json.dumps(returned_lite, default=str) == json.dumps(returned_sql, default=str)
    rows = _rows(sql_path)
    assert all(rows[t] for t in TABLES), "every table was written"
    assert _rows(lite_path) == rows
    with sqlite3.connect(lite_path) as conn:
        ended = conn.execute("SELECT run_id, state FROM runs ORDER BY run_id").fetchall()
    assert ended == [("r1", "SUCCEEDED"), ("r2", "FAILED")]


def test_the_same_cache_lookups(tmp_path: Path) -> None:
    sql, lite, _, lite_path = _stores(tmp_path)
    url = f"sqlite:///{lite_path}"
    with SqlMetadataStore(url) as store:
        for run_id in ("r1", "r2"):
            store.create_run(RunRecord(run_id, "p", "v", "RUNNING"), ir=IR)

        def add(run_id: str, task: str, state: str, finished: float | None) -> int:
            execution = ExecutionRecord(
                run_id=run_id,
                task=task,
                state=state,
                cache_key="k",
                finished_at=finished,
                inputs={"x": [1, {"y": None}]},
                outputs={"o": 2.5},
                error={"message": "e"} if state == "FAILED" else None,
            )
            return store.record_execution(execution)

        add("r1", "never-finished", "SUCCEEDED", None)
        add("r1", "old", "SUCCEEDED", 10.0)
        newest = add("r2", "new", "SUCCEEDED", 20.0)
        add("r2", "later-but-cached", "CACHED", 30.0)
        add("r2", "later-but-failed", "FAILED", 40.0)
        for n, slot in enumerate(("b", "a", "a")):
            art = ArtifactRecord(uri=f"u{n}", metadata={"n": n}, producer=newest, digest="d")
            artifact = store.record_artifact(art)
            store.record_event(EventRecord(newest, artifact, "OUTPUT", slot, 2 - n))
        store.record_event(EventRecord(newest, artifact, "INPUT", "in"))
        expected = store.cached_outputs("k")
    assert expected is not None and expected[0].id == newest and len(expected[1]) == 4
    stores = open_run_stores(url)
    assert isinstance(stores.recorder, SqliteWriter)
    for reader in (lite, stores.recorder):
        assert reader.cached_outputs("k") == expected
        assert reader.cached_outputs("other") is None
        assert reader.get_artifact("u1") == next(a for _, a in expected[1] if a.uri == "u1")
    assert not stores.full.is_open
    stores.close()
    lite.close()
    sql.close()


ErrorCase = Callable[[Any], object]
ERRORS: dict[str, ErrorCase] = {
    "run id taken": lambda s: s.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR),
    "finish an unknown run": lambda s: s.finish_run(
        "nope", state="FAILED", outputs={}, error=None, finished_at=1.0
    ),
    "execution of an unknown run": lambda s: s.record_execution(
        ExecutionRecord(run_id="nope", task="t", state="RUNNING")
    ),
    "unknown cached_from": lambda s: s.record_execution(
        ExecutionRecord(run_id="r1", task="t2", state="CACHED", cached_from=999)
    ),
    "executions of an unknown run": lambda s: s.insert_executions(
        [ExecutionRecord(run_id="nope", task="t", state="CACHED")]
    ),
    "cache hits with an unknown cached_from": lambda s: s.insert_executions(
        [ExecutionRecord(run_id="r1", task="t3", state="CACHED", cached_from=999)]
    ),
    "unknown producer": lambda s: s.record_artifact(ArtifactRecord(uri="u", producer=999)),
    "event of an unknown execution": lambda s: s.record_event(EventRecord(999, 1, "INPUT", "x")),
    "one of events of an unknown execution": lambda s: s.record_events(
        [EventRecord(999, 1, "INPUT", "x")]
    ),
    "events of unknown executions": lambda s: s.record_events(
        [EventRecord(999, 1, "INPUT", "x"), EventRecord(998, 1, "INPUT", "x")]
    ),
    "bad event kind": lambda s: s.record_events([EventRecord(1, 1, "SIDEWAYS", "x")]),  # type: ignore[arg-type]
    "metrics that are not numbers": lambda s: s.record_metrics("r1", 1, 1, {"a": "x"}),  # type: ignore[dict-item]
    "metrics of an unknown run": lambda s: s.record_metrics("nope", 1, 1, {"a": 1.0}),
    "step metrics that are not numbers": lambda s: s.record_step_metrics(
        [StepSeriesRecord("r1", 1, 1, "loss", [(0, "x")], 1)]  # type: ignore[list-item]
    ),
    "step metrics at a step that is not whole": lambda s: s.record_step_metrics(
        [StepSeriesRecord("r1", 1, 1, "loss", [(0.5, 1.0)], 1)]  # type: ignore[list-item]
    ),
    "step metrics of an unknown run": lambda s: s.record_step_metrics(
        [StepSeriesRecord("nope", 1, 1, "loss", [(0, 1.0)], 1)]
    ),
    "a run without parameters": lambda s: s.create_run(
        RunRecord("r9", "p", "v", "RUNNING", parameters=None),
        ir=IR,  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("case", list(ERRORS.values()), ids=list(ERRORS))
def test_the_same_errors(tmp_path: Path, case: ErrorCase) -> None:
    sql, lite, sql_path, lite_path = _stores(tmp_path)
    said = []
    for store, path in ((sql, sql_path), (lite, lite_path)):
        store.create_run(RunRecord("r1", "p", "v", "RUNNING", created_at=1.0), ir=IR)
        with pytest.raises((HeadwaterError, ValueError)) as caught:
            case(store)
        said.append((type(caught.value), str(caught.value).replace(str(path), "DB")))
        store.close()
    assert said[1] == said[0]
    assert _rows(lite_path) == _rows(sql_path)  # nothing half-written


def test_a_failed_write_in_a_batch_leaves_nothing(tmp_path: Path) -> None:
    _, lite, sql_path, lite_path = _stores(tmp_path)
    with pytest.raises(HeadwaterError), lite.batch():
        lite.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
        lite.record_execution(ExecutionRecord(run_id="nope", task="t", state="RUNNING"))
    lite.close()
    assert _rows(lite_path) == _rows(sql_path)  # both empty


def test_a_full_database_fails_a_write_cleanly_and_the_writer_goes_on(tmp_path: Path) -> None:
    _, lite, _, lite_path = _stores(tmp_path)
    lite.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
    conn = lite._connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")  # no room for one more page: a full disk
    big = {"blob": "x" * 200_000}
    with pytest.raises(StorageError, match="full"):
        lite.create_run(RunRecord("r2", "p", "v2", "RUNNING", parameters=big), ir=IR)
    with pytest.raises(StorageError, match="full"), lite.batch():
        lite.record_execution(ExecutionRecord(run_id="r1", task="t", state="RUNNING"))
        lite.create_run(RunRecord("r3", "p", "v3", "RUNNING", parameters=big), ir=IR)
    assert not conn.in_transaction
    conn.execute("PRAGMA max_page_count = 1073741823")
    lite.create_run(RunRecord("r4", "p", "v4", "RUNNING", parameters=big), ir=IR)
    lite.close()
    with SqlMetadataStore(f"sqlite:///{lite_path}") as store:
        assert sorted(r.run_id for r in store.list_runs()) == ["r1", "r4"]
        assert store.list_executions("r1") == []  # the failed batch left nothing


def test_a_batch_that_sqlite_ended_writes_nothing_more(tmp_path: Path) -> None:
    # A full disk makes SQLite end the batch's transaction; a caller that catches the error and
    # goes on must not get its later writes committed one by one.
    _, lite, _, lite_path = _stores(tmp_path)
    lite.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
    conn = lite._connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages}")
    big = RunRecord("big", "p", "v2", "RUNNING", parameters={"x": "y" * 200_000})
    with pytest.raises(StorageError), lite.batch():
        with contextlib.suppress(StorageError):
            lite.create_run(big, ir=IR)
        lite.finish_run("r1", state="SUCCEEDED", outputs={}, error=None, finished_at=5.0)
    lite.close()
    with SqlMetadataStore(f"sqlite:///{lite_path}") as store:
        run = store.get_run("r1")
        assert run is not None and run.state == "RUNNING"


def test_reads_inside_a_batch_see_its_writes(make_stores: Callable[[], RunStores]) -> None:
    stores = make_stores()
    writer = stores.recorder
    with writer.batch():
        writer.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
        done = ExecutionRecord(run_id="r1", task="t", state="SUCCEEDED", cache_key="k")
        execution = writer.record_execution(done)
        writer.record_artifact(ArtifactRecord(uri="u", producer=execution, digest="d"))
        assert writer.get_artifact("u") is not None
        hit = writer.cached_outputs("k")
        assert hit is not None and hit[0].id == execution
    assert not stores.full.is_open


def test_a_failing_probe_falls_back_to_the_writer(
    make_stores: Callable[[], RunStores],
) -> None:
    stores = make_stores()
    writer = stores.recorder
    assert isinstance(writer, SqliteWriter)
    writer.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
    writer.record_artifact(ArtifactRecord(uri="u", digest="d"))
    assert writer._reader is not None
    writer._reader.close()  # any error of the probe's: this one is "closed database"
    found = writer.get_artifact("u")
    assert found is not None and found.digest == "d"
    assert writer.cached_outputs("k") is None
    assert not stores.full.is_open  # answered without SQLAlchemy, and without waiting


def test_a_schema_changed_after_the_probe_is_not_written(
    make_stores: Callable[[], RunStores], tmp_path: Path
) -> None:
    writer = make_stores().recorder  # probed at the newest schema
    with sqlite3.connect(tmp_path / "md.db") as conn:  # then a newer Headwater migrates it
        conn.execute("UPDATE alembic_version SET version_num = '9999_future'")
    with pytest.raises(StorageError, match="9999_future"):
        writer.create_run(RunRecord("r1", "p", "v", "RUNNING"), ir=IR)
    with sqlite3.connect(tmp_path / "md.db") as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


@pytest.fixture
def make_stores(tmp_path: Path) -> Iterator[Callable[[], RunStores]]:
    made: list[RunStores] = []

    def make() -> RunStores:
        url = f"sqlite:///{tmp_path / 'md.db'}"
        open_store(url).close()
        store = open_run_stores(url)
        assert isinstance(store.recorder, SqliteWriter)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def test_the_first_write_marks_runs_whose_engine_died(tmp_path: Path) -> None:
    sql, lite, _, lite_path = _stores(tmp_path)
    url = f"sqlite:///{lite_path}"
    with SqlMetadataStore(url) as store:
        host = socket.gethostname()
        for run_id, pid in (("dead", 0), ("alive", os.getpid()), ("elsewhere", 0)):
            on = host if run_id != "elsewhere" else "another-host"
            store.create_run(
                RunRecord(run_id, "p", "v", "RUNNING", engine_host=on, engine_pid=pid), ir=IR
            )
            store.record_execution(ExecutionRecord(run_id=run_id, task="t", state="RUNNING"))
    lite.create_run(RunRecord("new", "p", "v", "RUNNING"), ir=IR)
    lite.close()
    sql.close()
    with SqlMetadataStore(url) as store:
        states = {r.run_id: r.state for r in store.list_runs()}
        assert states == {
            "dead": "INTERRUPTED",
            "alive": "RUNNING",
            "elsewhere": "RUNNING",
            "new": "RUNNING",
        }
        (task,) = store.list_executions("dead")
        assert task.state == "FAILED" and task.error is not None
        assert "engine stopped" in task.error["message"]
        assert store.list_executions("alive")[0].state == "RUNNING"


def test_a_run_records_itself_without_sqlalchemy(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pipeline = tmp_path / "p.py"
    pipeline.write_text(
        textwrap.dedent(
            """
            from kfp import dsl

            @dsl.component
            def make(n: int, out: dsl.Output[dsl.Metrics], data: dsl.Output[dsl.Dataset]) -> int:
                out.log_metric("n", n)
                with open(data.path, "w") as fh:
                    fh.write("x" * n)
                return n + 1

            @dsl.pipeline
            def p(n: int = 1) -> int:
                return make(n=n).outputs["Output"]
            """
        )
    )
    compiled = tmp_path / "p.yaml"
    env = {**os.environ, "HEADWATER_HOME": str(home)}
    cli = [sys.executable, "-m", "headwater"]
    for args in (["compile", str(pipeline), "-o", str(compiled)], ["run", str(compiled)]):
        done = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr  # the second one creates the store
    # The first run writes, the second is a cache hit: neither imports SQLAlchemy.
    script = (
        "import sys\n"
        "from headwater.cli.main import main\n"
        f"args = ['run', {str(compiled)!r}, '--param', 'n=5', '--json']\n"
        "codes = [main([*args, '--no-cache']), main(args)]\n"
        "print('sqlalchemy' in sys.modules, file=sys.stderr)\n"
        "sys.exit(max(codes))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False"
    first, second = (json.loads(line)["run_id"] for line in done.stdout.splitlines())
    with SqlMetadataStore(f"sqlite:///{home / 'metadata.db'}") as store:
        run = store.get_run(first)
        assert run is not None and run.state == "SUCCEEDED"
        assert run.outputs == {"Output": 6}
        assert run.metrics == {"n": 5.0}
        (execution,) = store.list_executions(first)
        assert execution.state == "SUCCEEDED" and execution.outputs == {"Output": 6}
        found = {a.schema_title: (e, a) for e, a in store.artifacts_of(execution.id or 0)}
        assert set(found) == {"system.Metrics", "system.Dataset"}
        event, data = found["system.Dataset"]
        assert event.kind == "OUTPUT" and event.slot == "data"
        assert data.digest and data.size == 5 and data.producer == execution.id
        (hit,) = store.list_executions(second)
        assert hit.state == "CACHED" and hit.cached_from == execution.id
        reused = {a.uri for _, a in store.artifacts_of(hit.id or 0)}
        assert reused == {a.uri for _, a in found.values()}


WRITER = textwrap.dedent(
    """
    import json, sys, time
    from headwater.metadata.base import ExecutionRecord, RunRecord
    from headwater.metadata.recorder import open_run_stores

    url, n, start = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    store = open_run_stores(url).recorder
    assert type(store).__name__ == "SqliteWriter", type(store)
    while time.time() < start:  # every writer starts at once
        time.sleep(0.001)
    run_id = f"run-{n}"
    store.create_run(RunRecord(run_id, "p", "v", "RUNNING"), ir={"n": 1})
    ids = []
    for i in range(30):
        with store.batch():
            execution = ExecutionRecord(run_id, f"task-{i}", "SUCCEEDED", cache_key=f"k{i}")
            ids.append(store.record_execution(execution))
    store.finish_run(run_id, state="SUCCEEDED", outputs={}, error=None, finished_at=time.time())
    assert "sqlalchemy" not in sys.modules
    print(json.dumps(ids))
    """
)


def test_concurrent_runs_each_record_everything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'md.db'}"
    open_store(url).close()
    ids = run_writers(url, 4, tmp_path, WRITER)
    assert len(ids) == len(set(ids)) == 120
    with SqlMetadataStore(url) as store:
        runs = store.list_runs()
        assert sorted(r.run_id for r in runs) == [f"run-{n}" for n in range(4)]
        assert {r.state for r in runs} == {"SUCCEEDED"}
        recorded = [e.id for r in runs for e in store.list_executions(r.run_id)]
        assert sorted(recorded) == sorted(ids)
