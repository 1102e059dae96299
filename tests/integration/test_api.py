"""The Python API on stores made by real runs, and the reading commands that sit on it.

`headwater.run` and `headwater.resume` run real pipelines in this process; the reading
commands run as real `headwater` subprocesses against a store with a dead engine's run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import Cli, pipeline, process_gone, run_ok

import headwater
from headwater.errors import NotFoundError

pytestmark = pytest.mark.integration


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """HEADWATER_HOME for runs in this process."""
    path = tmp_path / "home"
    monkeypatch.setenv("HEADWATER_HOME", str(path))
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    yield path


def test_the_api_answers_what_a_run_recorded(home: Path, tmp_path: Path) -> None:
    done = headwater.run(pipeline("storage_lineage"), {"rows": 4})
    assert done.state == "SUCCEEDED"

    [listed] = headwater.list_runs()
    assert (listed.run_id, listed.pipeline, listed.state) == (done.run_id, done.pipeline,
                                                              "SUCCEEDED")  # fmt: skip
    assert listed.parameters["rows"] == 4 and listed.metrics

    shown = headwater.get_run(done.run_id[:8])
    tasks = {t.name: t for t in shown.tasks}
    assert set(tasks) == {"make-dataset", "train", "evaluate"}
    [dataset_uri] = tasks["make-dataset"].output_artifacts["dataset"]
    assert tasks["train"].input_artifacts["data"] == [dataset_uri]
    assert Path(tasks["train"].log_path).is_file()

    artifact = headwater.get_artifact(dataset_uri)
    assert artifact.producer is not None and artifact.producer.task == "make-dataset"
    down = headwater.lineage(dataset_uri, direction="downstream")
    assert {n.get("task") for n in down.nodes if n["kind"] == "execution"} >= {"train"}
    assert f"r:{done.run_id}" in {n["id"] for n in down.nodes}

    assert headwater.clear_cache() == 3
    out = headwater.compile(pipeline("storage_lineage"), tmp_path / "lineage.yaml")
    again = headwater.run(out, {"rows": 4})
    assert not any(t.cached for t in again.tasks)  # the cache was cleared

    page = headwater.list_runs(limit=1, offset=1)
    assert [r.run_id for r in page] == [done.run_id]
    deleted = headwater.delete_run(done.run_id)
    assert dataset_uri in deleted.artifact_uris and not Path(dataset_uri).exists()
    with pytest.raises(NotFoundError):
        headwater.get_run(done.run_id)
    assert [r.run_id for r in headwater.list_runs()] == [again.run_id]


def test_resume_through_the_api(home: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    first = headwater.run(pipeline("storage_chain"), {"scratch": str(scratch)})
    assert first.state == "FAILED"
    assert headwater.get_run(first.run_id).state == "FAILED"
    (scratch / "marker").touch()
    resumed = headwater.resume(first.run_id)
    assert (resumed.run_id, resumed.state) == (first.run_id, "SUCCEEDED")
    assert [r.state for r in headwater.list_runs()] == ["SUCCEEDED"]


# --- reading commands on a store whose run lost its engine -------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _orphan(db: Path, run_id: str) -> None:
    """Make the store say what a SIGKILLed engine leaves: the run RUNNING under a dead
    engine on this host, its last task RUNNING."""
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(
            "UPDATE runs SET state = 'RUNNING', finished_at = NULL, engine_host = ?, "
            "engine_pid = ? WHERE run_id = ?",
            (socket.gethostname(), _dead_pid(), run_id),
        )
        conn.execute(
            "UPDATE executions SET state = 'RUNNING' WHERE run_id = ? AND task = 'evaluate'",
            (run_id,),
        )


def _snapshot(db: Path) -> tuple[str, int, list[tuple[object, ...]]]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT run_id, state, finished_at FROM runs").fetchall()
        rows += conn.execute("SELECT task, state, error FROM executions ORDER BY id").fetchall()
    return hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns, rows


def test_reading_commands_write_nothing_and_show_a_dead_engine_run_interrupted(
    headwater: Cli,
) -> None:
    run_id = run_ok(headwater.run("storage_lineage"))["run_id"]
    db = headwater.home / "metadata.db"
    _orphan(db, run_id)
    before = _snapshot(db)

    [listed] = headwater.runs()
    assert listed["state"] == "INTERRUPTED"
    assert [r["run_id"] for r in headwater.runs("--state", "INTERRUPTED")] == [run_id]
    assert headwater.runs("--state", "RUNNING") == []
    shown = headwater.show(run_id)
    states = {t["name"]: t["state"] for t in shown["tasks"]}
    assert (shown["state"], states["evaluate"], states["train"]) == ("INTERRUPTED", "FAILED",
                                                                     "SUCCEEDED")  # fmt: skip
    graph = headwater("lineage", "1", "--json").json()
    assert {n["id"]: n.get("state") for n in graph["nodes"]}[f"r:{run_id}"] == "INTERRUPTED"
    for command in (["runs", "list"], ["runs", "show", run_id], ["lineage", "1"],
                    ["artifacts", "show", "1"]):  # fmt: skip
        result = headwater(*command)
        assert result.returncode == 0, result.describe()

    assert _snapshot(db) == before  # neither the file nor any row changed

    # The next writer makes it durable.
    run_ok(headwater.run("storage_lineage"))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        state = conn.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    assert state == ("INTERRUPTED",)


SPARE_SCRIPT = """
import json, os, sys
import headwater
from headwater.executors import prestart

def where():
    run = headwater.run(sys.argv[1], enable_cache=False)
    assert run.state == "SUCCEEDED", run.error
    pid, cwd = run.outputs["Output"].split(" ", 1)
    return int(pid), cwd

first, _ = where()
spare = prestart._spares[False].pid
second, _ = where()  # on the spare the first run left
os.chdir(sys.argv[2])
third, cwd = where()  # elsewhere: a server started there, not the spare
left = prestart._spares[False].pid
os.environ["PYTHONPATH"] = sys.argv[2]
fourth, _ = where()  # another environment: a server started with it, not the spare
print(json.dumps({"first": first, "spare": spare, "second": second, "third": third,
                  "cwd": cwd, "left": left, "fourth": fourth,
                  "last": prestart._spares[False].pid}))
"""


def test_runs_in_one_process_take_a_warm_fork_server_that_ends_with_it(
    home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", SPARE_SCRIPT, pipeline("parent_pid"), str(elsewhere)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout.splitlines()[-1])
    assert pids["second"] == pids["spare"] != pids["first"]
    assert pids["third"] not in (pids["first"], pids["spare"]) and pids["cwd"] == str(elsewhere)
    assert pids["fourth"] not in (pids["third"], pids["left"])
    # The spare left for a next run that never came ended with the process.
    for pid in {pids[k] for k in ("first", "spare", "third", "left", "fourth", "last")}:
        assert process_gone(pid), pid
