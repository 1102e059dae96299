"""Storage through the `headwater` CLI: runs/artifacts/lineage commands, the content-addressed
cache, resume, a SIGKILLed engine, concurrent runs on one SQLite store, an S3 pipeline root
(a real moto server) and PostgreSQL.

Every command is a real subprocess (`python -m headwater ...`) with HEADWATER_HOME in the
test's tmp_path; the pipelines live in `pipelines/storage_*.py`. Tasks that must be counted
append a line per call to a file in the test's scratch directory. Waits poll.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_harness import (
    Cli,
    CliResult,
    cached_flags,
    kill_leftovers,
    one_line,
    pipeline,
    process_gone,
    run_failed,
    run_ok,
    task_states,
    wait_for,
)
from s3_server import S3Server

pytestmark = pytest.mark.integration


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """Where tasks record their calls (and find their markers)."""
    path = tmp_path / "scratch"
    path.mkdir()
    return path


def tasks_of(shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {task["name"]: task for task in shown["tasks"]}


def has_open(pid: int, path: Path) -> bool:
    """True if process `pid` has `path` open (Linux /proc)."""
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd) == str(path):
                return True
    return False


def calls(scratch: Path, label: str) -> int:
    """How many times the task labelled `label` ran."""
    path = scratch / f"calls-{label}.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


def blake2b(data: bytes) -> str:
    """An artifact's documented digest: BLAKE2b-160 of its bytes."""
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def output_uri(task: dict[str, Any], slot: str) -> str:
    uris = task["artifacts"]["outputs"][slot]
    assert len(uris) == 1, task
    return str(uris[0])


# --- runs list / show --------------------------------------------------------------------------


def test_runs_list_newest_first_with_metrics_and_filters(headwater: Cli, scratch: Path) -> None:
    first = headwater.run_ok("storage_lineage", params={"lr": 0.1})["run_id"]
    second = headwater.run_ok("storage_lineage", params={"lr": 0.25})["run_id"]
    broken = run_failed(headwater.run("storage_chain", params={"scratch": scratch}))["run_id"]

    listed = headwater.runs()
    assert [r["run_id"] for r in listed] == [broken, second, first]
    for entry in listed:
        assert {"run_id", "pipeline", "state", "created_at", "metrics"} <= set(entry), entry
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", entry["created_at"]), entry
    by_id = {r["run_id"]: r for r in listed}
    assert by_id[first]["pipeline"] == "storage-lineage"
    assert by_id[first]["state"] == "SUCCEEDED"
    assert by_id[first]["metrics"] == pytest.approx({"accuracy": 0.9, "loss": 0.5})
    assert by_id[second]["metrics"] == pytest.approx({"accuracy": 0.75, "loss": 0.5})
    assert by_id[broken]["pipeline"] == "storage-chain"
    assert by_id[broken]["state"] == "FAILED"
    assert by_id[broken]["metrics"] == {}

    def ids(*args: str) -> list[str]:
        return [r["run_id"] for r in headwater.runs(*args)]

    assert ids("--pipeline", "storage-lineage") == [second, first]
    assert ids("--state", "FAILED") == [broken]
    assert ids("--pipeline", "storage-lineage", "--state", "FAILED") == []

    table = headwater("runs", "list")
    assert table.returncode == 0, table.describe()
    header, *rows = table.stdout.strip().splitlines()
    assert "accuracy" in header.split() and "loss" in header.split(), table.stdout
    assert [row.split()[0] for row in rows] == [broken, second, first]
    assert "0.9" in next(row for row in rows if row.startswith(first)).split()


def test_runs_show_tasks_artifacts_and_logs(headwater: Cli) -> None:
    run_id = headwater.run_ok("storage_lineage", params={"lr": 0.1})["run_id"]

    shown = headwater.show(run_id[:8])  # a unique prefix is enough
    assert shown["run_id"] == run_id
    assert shown["state"] == "SUCCEEDED"
    assert shown["pipeline"] == "storage-lineage"
    tasks = tasks_of(shown)
    assert set(tasks) == {"make-dataset", "train", "evaluate"}
    for task in tasks.values():
        assert task["state"] == "SUCCEEDED", task
        assert task["cached"] is False
        assert re.fullmatch(r"\d+\.\d+s", task["duration"]), task
        assert Path(task["log_path"]).is_file(), task
    assert tasks["train"]["inputs"]["lr"] == pytest.approx(0.1)
    assert tasks["evaluate"]["outputs"] == {"Output": "weights rows=3 lr=0.1"}
    dataset = output_uri(tasks["make-dataset"], "dataset")
    model = output_uri(tasks["train"], "model")
    artifacts = headwater.home / "artifacts" / "storage-lineage" / run_id
    assert dataset == str(artifacts / "make-dataset" / "dataset")
    assert model == str(artifacts / "train" / "model")
    assert tasks["train"]["artifacts"]["inputs"] == {"data": [dataset]}
    assert tasks["evaluate"]["artifacts"]["inputs"] == {"model": [model]}
    assert Path(dataset).read_text() == "row-0\nrow-1\nrow-2"

    text = headwater("runs", "show", run_id)
    assert text.returncode == 0, text.describe()
    logs = headwater.home / "runs" / run_id / "tasks"
    assert f"logs       {logs}/\n" in text.stdout, text.stdout
    for name, task in tasks.items():
        assert name in text.stdout
        # Each log shown relative to the run's log folder, printed once above the table.
        assert task["log_path"].startswith(f"{logs}/")
        assert f"  {task['log_path'][len(str(logs)) + 1 :]}\n" in text.stdout

    rerun = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    assert cached_flags(rerun) == dict.fromkeys(tasks, True)
    # A cached Metrics artifact still counts as the rerun's metrics.
    assert headwater.runs()[0]["metrics"] == pytest.approx({"accuracy": 0.9, "loss": 0.5})
    again = tasks_of(headwater.show(rerun["run_id"]))
    for name, task in again.items():
        assert task["cached"] is True, task
        assert task["cached_from"] == tasks[name]["execution_id"], task


def test_artifacts_show_by_uri_and_id(headwater: Cli) -> None:
    run_id = headwater.run_ok("storage_lineage", params={"lr": 0.1})["run_id"]
    model = output_uri(tasks_of(headwater.show(run_id))["train"], "model")
    data = Path(model).read_bytes()

    shown = headwater("artifacts", "show", model, "--json").json()
    assert shown["uri"] == model
    assert shown["type"] == "system.Model"
    assert shown["digest"] == blake2b(data)
    assert shown["size"] == len(data)
    assert shown["metadata"] == {"lr": pytest.approx(0.1)}
    assert shown["producer"]["task"] == "train"
    assert shown["producer"]["run_id"] == run_id

    by_id = headwater("artifacts", "show", str(shown["id"]), "--json").json()
    assert by_id == shown
    text = headwater("artifacts", "show", str(shown["id"]))
    assert text.returncode == 0, text.describe()
    assert blake2b(data) in text.stdout and model in text.stdout


# --- lineage ---------------------------------------------------------------------------------


def test_lineage_upstream_is_multi_hop(headwater: Cli) -> None:
    run_id = headwater.run_ok("storage_lineage", params={"lr": 0.1})["run_id"]
    tasks = tasks_of(headwater.show(run_id))
    dataset = output_uri(tasks["make-dataset"], "dataset")
    model = output_uri(tasks["train"], "model")
    train, make = (
        f"e:{tasks['train']['execution_id']}",
        f"e:{tasks['make-dataset']['execution_id']}",
    )
    evaluate = f"e:{tasks['evaluate']['execution_id']}"

    graph = headwater("lineage", model, "--upstream", "--json").json()
    nodes = {n["id"]: n for n in graph["nodes"]}
    edges = {(e["from"], e["to"], e["kind"]) for e in graph["edges"]}
    kinds = {n["kind"] for n in nodes.values()}
    assert kinds == {"artifact", "execution", "run"}, nodes
    uris = {n["uri"]: i for i, n in nodes.items() if n["kind"] == "artifact"}
    assert set(uris) == {model, dataset}
    assert set(i for i, n in nodes.items() if n["kind"] == "execution") == {train, make}
    assert nodes[train]["task"] == "train"
    assert nodes[train]["inputs"]["lr"] == pytest.approx(0.1)
    assert nodes[make]["task"] == "make-dataset"
    assert nodes[f"r:{run_id}"]["kind"] == "run"
    assert {
        (uris[dataset], train, "INPUT"),
        (train, uris[model], "OUTPUT"),
        (make, uris[dataset], "OUTPUT"),
        (f"r:{run_id}", train, "RUN"),
        (f"r:{run_id}", make, "RUN"),
    } <= edges
    assert evaluate not in nodes  # upstream only

    one_hop = headwater("lineage", str(uris[model][2:]), "--upstream", "--depth", "1", "--json")
    near = {n["id"] for n in one_hop.json()["nodes"]}
    assert {uris[model], train, uris[dataset]} <= near
    assert make not in near

    down = headwater("lineage", model, "--downstream", "--json").json()
    down_nodes = {n["id"]: n for n in down["nodes"]}
    assert evaluate in down_nodes and train not in down_nodes
    assert any(n.get("schema_title") == "system.Metrics" for n in down_nodes.values()), down

    text = headwater("lineage", model, "--upstream")
    assert text.returncode == 0, text.describe()
    assert "train" in text.stdout and dataset in text.stdout and run_id in text.stdout


# --- delete ----------------------------------------------------------------------------------


def test_runs_delete_keeps_artifacts_other_runs_use(headwater: Cli) -> None:
    first = headwater.run_ok("storage_lineage", params={"lr": 0.1})["run_id"]
    second_result = headwater.run_ok("storage_lineage", params={"lr": 0.2})
    second = second_result["run_id"]
    assert cached_flags(second_result)["make-dataset"] is True  # reuses the first run's dataset
    one, two = tasks_of(headwater.show(first)), tasks_of(headwater.show(second))
    dataset = output_uri(one["make-dataset"], "dataset")
    assert output_uri(two["make-dataset"], "dataset") == dataset
    first_model, second_model = output_uri(one["train"], "model"), output_uri(two["train"], "model")

    deleted = headwater("runs", "delete", first)
    assert deleted.returncode == 0, deleted.describe()
    assert [r["run_id"] for r in headwater.runs()] == [second]
    one_line(headwater("runs", "show", first))
    assert Path(dataset).is_file(), "the dataset the second run reused was deleted"
    assert not Path(first_model).exists()
    assert Path(second_model).is_file()
    one_line(headwater("artifacts", "show", first_model))
    assert headwater("artifacts", "show", dataset, "--json").json()["uri"] == dataset

    # Now the dataset belongs to the second run alone: it goes with it.
    deleted = headwater("runs", "delete", second)
    assert deleted.returncode == 0, deleted.describe()
    assert headwater.runs() == []
    assert not Path(dataset).exists()
    assert not Path(second_model).exists()


# --- the content-addressed cache -------------------------------------------------------------


def test_cache_hits_across_different_pipelines(headwater: Cli) -> None:
    a = headwater.run_ok("storage_shared_a", params={"word": "river"})
    assert cached_flags(a) == {"shout": False, "twice": False}
    assert a["outputs"] == {"Output": "RIVER!RIVER!"}

    b = headwater.run_ok("storage_shared_b", params={"word": "river"})
    assert cached_flags(b) == {"shout": True, "count-letters": False}
    assert b["outputs"] == {"Output": 5}
    source = tasks_of(headwater.show(a["run_id"]))["shout"]["execution_id"]
    assert tasks_of(headwater.show(b["run_id"]))["shout"]["cached_from"] == source

    other_word = headwater.run_ok("storage_shared_b", params={"word": "lake"})
    assert cached_flags(other_word) == {"shout": False, "count-letters": False}


def test_input_file_changed_in_place_is_a_miss(headwater: Cli, tmp_path: Path) -> None:
    changing, steady = tmp_path / "changing.txt", tmp_path / "steady.txt"
    changing.write_text("old-1")
    steady.write_text("steady")
    params = {"changing": changing, "steady": steady}

    first = headwater.run_ok("storage_import", params=params)
    assert first["outputs"] == {"Output": "old-1|steady"}
    changing.write_text("new-2")  # same size, other bytes, same path

    second = headwater.run_ok("storage_import", params=params)
    assert second["outputs"] == {"Output": "new-2|steady"}
    flags = cached_flags(second)
    assert flags["read-text"] is False
    assert flags["read-text-2"] is True

    third = headwater.run_ok("storage_import", params=params)
    assert third["outputs"] == second["outputs"]
    assert cached_flags(third)["read-text"] is True


def test_pipeline_artifact_changed_in_place_is_not_served_stale(headwater: Cli) -> None:
    first = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    dataset = Path(output_uri(tasks_of(headwater.show(first["run_id"]))["make-dataset"], "dataset"))
    dataset.write_text("x\ny\nz\nw\nv")  # five rows where make-dataset wrote three

    second = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    train = tasks_of(headwater.show(second["run_id"]))["train"]
    consumed = Path(train["artifacts"]["inputs"]["data"][0])
    rows = len(consumed.read_text().splitlines())
    # Whatever was reused, the model must have been trained on the dataset the run used.
    assert second["outputs"] == {"Output": f"weights rows={rows} lr=0.1"}, (
        f"train consumed {consumed} with {rows} rows; cached={cached_flags(second)}"
    )


def test_an_output_rewritten_with_its_old_mtime_is_not_served_stale(headwater: Cli) -> None:
    first = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    dataset = Path(output_uri(tasks_of(headwater.show(first["run_id"]))["make-dataset"], "dataset"))
    before = dataset.stat()
    dataset.write_text("ROW-0\nROW-1\nROW-2")  # same size, other bytes
    # ... with its old times put back, as `cp -p`, `rsync -t` or a restore from backup do.
    os.utime(dataset, ns=(before.st_atime_ns, before.st_mtime_ns))

    second = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    assert cached_flags(second)["make-dataset"] is False
    remade = output_uri(tasks_of(headwater.show(second["run_id"]))["make-dataset"], "dataset")
    assert Path(remade).read_text() == "row-0\nrow-1\nrow-2"


def test_a_fifo_in_an_output_directory_does_not_hang_the_run(headwater: Cli) -> None:
    # The recorder digests each output; opening the FIFO used to block it, and the run, forever.
    result = headwater.run_ok("storage_fifo")
    assert result["outputs"] == {"Output": 2}
    uri = output_uri(tasks_of(headwater.show(result["run_id"]))["make-pipes"], "data")
    artifact = headwater("artifacts", "show", uri, "--json").json()
    # The FIFO holds no bytes; the symlink reads as the file it points to.
    expected = hashlib.blake2b(digest_size=20)
    for name in ("rows.txt", "same-rows.txt"):
        expected.update(name.encode() + b"\0" + b"a\nb\n")
    assert (artifact["digest"], artifact["size"]) == (expected.hexdigest(), 8)

    rerun = headwater.run_ok("storage_fifo")
    assert cached_flags(rerun) == {"make-pipes": True, "count-rows": True}


def test_deleted_output_is_a_miss(headwater: Cli) -> None:
    first = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    dataset = Path(output_uri(tasks_of(headwater.show(first["run_id"]))["make-dataset"], "dataset"))
    dataset.unlink()

    second = headwater.run_ok("storage_lineage", params={"lr": 0.1})
    flags = cached_flags(second)
    assert flags["make-dataset"] is False
    again = tasks_of(headwater.show(second["run_id"]))
    remade = Path(output_uri(again["make-dataset"], "dataset"))
    assert remade.read_text() == "row-0\nrow-1\nrow-2"
    # The same bytes under the new run's URI: train's inputs are unchanged by content.
    assert flags["train"] is True
    assert second["outputs"] == first["outputs"]


def test_no_cache_and_disabled_caching_run_the_task(headwater: Cli, scratch: Path) -> None:
    params = {"scratch": scratch}
    first = headwater.run_ok("storage_switches", params=params)
    assert cached_flags(first) == {"touch": False, "touch-2": False}

    second = headwater.run_ok("storage_switches", params=params)
    assert cached_flags(second) == {"touch": True, "touch-2": False}
    assert (calls(scratch, "on"), calls(scratch, "off")) == (1, 2)

    forced = headwater.run_ok("storage_switches", "--no-cache", params=params)
    assert cached_flags(forced) == {"touch": False, "touch-2": False}
    assert (calls(scratch, "on"), calls(scratch, "off")) == (2, 3)


def test_failed_outcomes_and_failed_tasks_run_again_while_successes_are_reused(
    headwater: Cli, scratch: Path
) -> None:
    params = {"scratch": scratch}
    first = run_failed(headwater.run("storage_failures", params=params))
    assert task_states(first) == {
        **dict.fromkeys(["train-trial", "train-trial-2", "train-trial-3"], "SUCCEEDED"),
        **{"judge": "SUCCEEDED", "judge-2": "SUCCEEDED", "boom": "FAILED"},
    }

    second = run_failed(headwater.run("storage_failures", params=params))
    # Only the successes are reused: the trial that raised, the one without its objective,
    # the task that marked its outcome failed and the task that failed all run again.
    assert cached_flags(second) == {
        "train-trial": True,
        "train-trial-2": False,
        "train-trial-3": False,
        "judge": True,
        "judge-2": False,
        "boom": False,
    }
    ran = ["train-0.5", "train--1", "train-2", "judge-ok", "judge-bad", "boom"]
    assert [calls(scratch, label) for label in ran] == [1, 2, 2, 1, 2, 2]
    shown = tasks_of(headwater.show(second["run_id"]))
    reasons = {
        name: (task["state"], task["error"]["error_type"], task["error"]["message"])
        for name, task in shown.items()
        if name != "boom"
        if task["error"]
    }
    assert reasons == {
        "train-trial-2": ("SUCCEEDED", "FailedOutcome", "ValueError: diverged at x=-1"),
        "train-trial-3": (
            "SUCCEEDED",
            "FailedOutcome",
            "did not report the objective 'loss' (reported ['accuracy'])",
        ),
        "judge-2": ("SUCCEEDED", "FailedOutcome", "the data was bad"),
    }
    assert shown["train-trial-2"]["outputs"]["Output"] == {
        "trial_index": 1,
        "error": "ValueError: diverged at x=-1",
    }

    # Resuming the run does not reuse its own failures either.
    resumed = run_failed(headwater("run", "--resume", second["run_id"], "--json"))
    assert {name for name, hit in cached_flags(resumed).items() if hit} == {"train-trial", "judge"}
    assert [calls(scratch, label) for label in ran] == [1, 3, 3, 1, 3, 3]


# --- resume ----------------------------------------------------------------------------------


def test_resume_completes_a_failed_run(headwater: Cli, scratch: Path) -> None:
    first = run_failed(headwater.run("storage_chain", params={"scratch": scratch}))
    run_id = first["run_id"]
    assert {t["name"]: t["state"] for t in first["tasks"]}["step-3"] == "FAILED"
    assert [calls(scratch, label) for label in "abcd"] == [1, 1, 1, 0]
    (scratch / "marker").touch()

    resumed = run_ok(headwater("run", "--resume", run_id, "--json"))
    assert resumed["run_id"] == run_id
    assert resumed["outputs"] == {"Output": "abcd"}
    flags = cached_flags(resumed)
    assert flags == {"step": True, "step-2": True, "step-3": False, "step-4": False}
    # step-2 has caching off: only the run's own record can have reused it.
    assert [calls(scratch, label) for label in "abcd"] == [1, 1, 2, 1]
    assert [(r["run_id"], r["state"]) for r in headwater.runs()] == [(run_id, "SUCCEEDED")]
    shown = tasks_of(headwater.show(run_id))
    assert shown["step-3"]["state"] == "SUCCEEDED" and shown["step-4"]["state"] == "SUCCEEDED"
    # step-3's log holds the failed attempt, then a line marking where the resumed one starts.
    log = Path(shown["step-3"]["log_path"]).read_text()
    failed, marker, after = log.partition("===== headwater: attempt 1 starts at ")
    assert "Traceback" in failed and marker and "Traceback" not in after
    assert "the output above is from an earlier attempt =====" in after.splitlines()[0]

    again = headwater("run", "--resume", run_id, "--json")
    assert run_id in one_line(again)
    assert again.stdout == ""


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["run", "--resume", "no-such-run-4f1d", "--json"], id="unknown-run"),
        pytest.param(
            ["run", pipeline("storage_chain"), "--resume", "anything", "--json"],
            id="with-a-pipeline",
        ),
    ],
)
def test_resume_refusals(headwater: Cli, args: list[str]) -> None:
    one_line(headwater(*args))


@pytest.mark.timeout(180)
def test_concurrent_resumes_of_one_run_run_it_once(headwater: Cli, scratch: Path) -> None:
    (scratch / "fail").touch()
    run_id = run_failed(headwater.run("storage_gate", params={"scratch": scratch}))["run_id"]
    (scratch / "fail").unlink()

    # Four engines resume the run at once. They queue behind a lock on the store until all
    # four have opened it, so they look at the run together; the one that claims it waits in
    # the gate task until every other has given up.
    db = headwater.home / "metadata.db"
    gate = sqlite3.connect(db, isolation_level=None)
    gate.execute("PRAGMA locking_mode = EXCLUSIVE")
    gate.execute("BEGIN EXCLUSIVE")
    gate.execute("SELECT count(*) FROM runs").fetchall()
    engines = [
        headwater.popen(
            "run", "--resume", run_id, "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    try:
        wait_for(
            lambda: all(has_open(e.pid, db) for e in engines), 60, "four engines to open the store"
        )
        gate.execute("COMMIT")
        gate.close()
        # Before the claim was atomic, several engines ran the gate task at once.
        wait_for(
            lambda: sum(e.poll() is not None for e in engines) == 3 or calls(scratch, "gate") > 2,
            60,
            "three engines to exit",
        )
        assert calls(scratch, "gate") <= 2, "more than one engine ran the resumed task"
        [winner] = [e for e in engines if e.poll() is None]
        holder = f"{winner.pid}@{socket.gethostname()}"
        for engine in engines:
            if engine is winner:
                continue
            stdout, stderr = engine.communicate()
            line = one_line(CliResult.of(engine.returncode, stdout, stderr))
            assert run_id in line and holder in line, line
        (scratch / "open").touch()
        stdout, stderr = winner.communicate(timeout=60)
        resumed = run_ok(CliResult.of(winner.returncode, stdout, stderr))
    finally:
        gate.close()
        for engine in engines:
            kill_leftovers(engine)
    assert resumed["outputs"] == {"Output": "quick+gate"}
    assert (calls(scratch, "quick"), calls(scratch, "gate")) == (1, 2)
    assert [(r["run_id"], r["state"]) for r in headwater.runs()] == [(run_id, "SUCCEEDED")]


# --- a SIGKILLed engine ----------------------------------------------------------------------


def test_sigkilled_engine_is_interrupted_and_resumable(
    headwater: Cli, scratch: Path, tmp_path: Path
) -> None:
    pid_file = scratch / "pid"
    db = headwater.home / "metadata.db"
    with (tmp_path / "out.txt").open("w") as out, (tmp_path / "err.txt").open("w") as err:
        engine = headwater.popen(
            "run",
            pipeline("storage_nap"),
            "--json",
            "--param",
            f"scratch={scratch}",
            stdout=out,
            stderr=err,
        )
    task_pid: int | None = None

    def nap_recorded_running() -> bool:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            row = conn.execute("SELECT state FROM executions WHERE task = 'nap'").fetchone()
        return row is not None and row[0] == "RUNNING"

    try:
        wait_for(pid_file.is_file, 30, "the nap task to start")
        task_pid = int(pid_file.read_text())
        wait_for(nap_recorded_running, 10, "the nap task to be recorded RUNNING")
        assert engine.poll() is None, (tmp_path / "err.txt").read_text()

        engine.send_signal(signal.SIGKILL)
        engine.wait(timeout=10)
        wait_for(lambda: process_gone(task_pid), 10, f"the orphaned task {task_pid} to end")

        [listed] = headwater.runs()
        run_id = listed["run_id"]
        assert listed["state"] == "INTERRUPTED"
        states = {n: t["state"] for n, t in tasks_of(headwater.show(run_id)).items()}
        assert states == {"quick": "SUCCEEDED", "nap": "FAILED"}

        (scratch / "marker").touch()
        resumed = run_ok(headwater("run", "--resume", run_id, "--json"))
        assert resumed["run_id"] == run_id
        assert cached_flags(resumed) == {"quick": True, "nap": False}
        assert resumed["outputs"] == {"Output": "quick+nap"}
        assert (calls(scratch, "quick"), calls(scratch, "nap")) == (1, 2)
        assert [r["state"] for r in headwater.runs()] == ["SUCCEEDED"]
    finally:
        kill_leftovers(engine, task_pid)


# --- concurrent runs -------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_concurrent_runs_share_one_sqlite_store(headwater: Cli) -> None:
    seeds = range(8)
    engines = {
        seed: headwater.popen(
            "run",
            pipeline("storage_fanout"),
            "--json",
            "--param",
            f"seed={seed}",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for seed in seeds
    }
    results = {}
    try:
        for seed, engine in engines.items():
            stdout, stderr = engine.communicate(timeout=150)
            cli = CliResult.of(engine.returncode, stdout, stderr)
            results[seed] = run_ok(cli)
            assert results[seed]["outputs"] == {"Output": seed * 100 + 50}, cli.describe()
    finally:
        for engine in engines.values():
            kill_leftovers(engine)

    listed = headwater.runs()
    assert sorted(r["run_id"] for r in listed) == sorted(r["run_id"] for r in results.values())
    assert {r["state"] for r in listed} == {"SUCCEEDED"}
    for seed, result in results.items():
        shown = headwater.show(result["run_id"])
        assert shown["parameters"] == {"seed": seed}
        states = {n: t["state"] for n, t in tasks_of(shown).items()}
        assert states == dict.fromkeys(
            ["work", "work-2", "work-3", "work-4", "work-5"], "SUCCEEDED"
        )


# --- an S3 pipeline root (moto) --------------------------------------------------------------


@pytest.fixture
def s3_cli(headwater: Cli, s3_env: S3Server) -> Cli:
    """The CLI with the AWS environment `s3_env` set (and nothing else of AWS's)."""
    for name in [n for n in headwater.env if n.startswith("AWS_")]:
        del headwater.env[name]
    headwater.env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    return headwater


@pytest.mark.parametrize("how", ["flag", "env"], ids=["--pipeline-root", "HEADWATER_PIPELINE_ROOT"])
def test_s3_pipeline_root(s3_cli: Cli, s3_env: S3Server, s3_bucket: str, how: str) -> None:
    root = f"s3://{s3_bucket}/root"
    args: list[str] = []
    if how == "flag":
        args = ["--pipeline-root", root]
    else:
        s3_cli.env["HEADWATER_PIPELINE_ROOT"] = root

    result = s3_cli.run_ok("storage_s3", *args)
    run_id = result["run_id"]
    assert result["outputs"] == {"Output": "RIVER DATA"}
    key = f"root/storage-s3/{run_id}/produce/data"
    with contextlib.closing(s3_env.client()) as client:
        listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="root/")
        keys = {o["Key"] for o in listed.get("Contents", [])}
        assert key in keys, keys
        body = client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert body == b"river data"

    shown = s3_cli.show(run_id)
    assert shown["pipeline_root"] == root
    tasks = tasks_of(shown)
    uri = f"s3://{s3_bucket}/{key}"
    assert output_uri(tasks["produce"], "data") == uri
    assert tasks["consume"]["artifacts"]["inputs"] == {"data": [uri]}

    artifact = s3_cli("artifacts", "show", uri, "--json").json()
    assert artifact["digest"] == blake2b(body)
    assert artifact["size"] == len(body)
    assert artifact["metadata"] == {"chars": 10}

    rerun = s3_cli.run_ok("storage_s3", *args)
    assert cached_flags(rerun) == {"produce": True, "consume": True}
    assert rerun["outputs"] == result["outputs"]

    def objects() -> set[str]:
        with contextlib.closing(s3_env.client()) as client:
            listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="root/")
        return {o["Key"] for o in listed.get("Contents", [])}

    # The rerun reused the first run's object: deleting it keeps the object, deleting the
    # first run too removes it from the bucket.
    for run in (rerun["run_id"], run_id):
        deleted = s3_cli("runs", "delete", run)
        assert deleted.returncode == 0, deleted.describe()
        assert (key in objects()) is (run != run_id)
    assert s3_cli.runs() == []


def test_s3_missing_bucket_is_one_line(s3_cli: Cli) -> None:
    bucket = f"hw-missing-{uuid.uuid4().hex[:8]}"
    cli = s3_cli.run("storage_s3", "--pipeline-root", f"s3://{bucket}/root")
    assert bucket in one_line(cli)
    assert not (s3_cli.home / "runs").exists() or not any((s3_cli.home / "runs").iterdir())


def test_s3_unreachable_endpoint_fails_fast(s3_cli: Cli) -> None:
    s3_cli.env["AWS_ENDPOINT_URL"] = "http://127.0.0.1:1"
    started = time.monotonic()
    cli = s3_cli.run("storage_s3", "--pipeline-root", "s3://any-bucket/root")
    took = time.monotonic() - started
    line = one_line(cli)
    assert took < 15, f"took {took:.1f}s"
    assert "127.0.0.1:1" in line


# --- metadata that cannot be written --------------------------------------------------------

#: Runs a pipeline through the Python API with a hook that collects run warnings; prints them.
API_RUN = """
import json, sys
from headwater.engine.hooks import RunHooks
from headwater.api.running import run

class Collect(RunHooks):
    def __init__(self):
        self.messages = []

    def on_run_warning(self, *, run, message):
        self.messages.append(message)

collect = Collect()
result = run(sys.argv[1], enable_cache=False, hooks=[collect])
print(json.dumps({"state": result.state, "warnings": collect.messages}))
"""


def test_failed_metadata_writes_reach_the_hooks_not_stderr(headwater: Cli, tmp_path: Path) -> None:
    headwater.run_ok("storage_lineage")  # creates the store
    with contextlib.closing(sqlite3.connect(headwater.home / "metadata.db")) as conn:
        conn.execute("DROP TABLE metrics")  # every metrics write now fails
    script = tmp_path / "api_run.py"
    script.write_text(API_RUN)
    proc = subprocess.run(
        [sys.executable, str(script), pipeline("storage_lineage")],
        capture_output=True,
        text=True,
        env=headwater.env,
        cwd=headwater.cwd,
        timeout=60,
    )
    cli = CliResult.of(proc.returncode, proc.stdout, proc.stderr)
    assert cli.returncode == 0 and cli.result is not None, cli.describe()
    assert cli.result["state"] == "SUCCEEDED"
    [warning] = cli.result["warnings"]
    assert "recording metadata" in warning and "metrics" in warning, warning
    assert "\n" not in warning, warning
    # A library reports through its caller's hooks; it does not print on the caller's stderr.
    assert "metadata" not in cli.stderr, cli.describe()
    # The CLI's reporter is such a hook: one warning line, and the run still succeeds.
    shown = headwater.run("storage_lineage", "--no-cache")
    run_ok(shown)
    warned = [line for line in shown.stderr.splitlines() if "recording metadata" in line]
    assert len(warned) == 1 and warned[0].startswith("headwater: warning: "), shown.describe()


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["runs", "show", "nope"], {}, id="runs-show-unknown"),
        pytest.param(["runs", "delete", "nope"], {}, id="runs-delete-unknown"),
        pytest.param(["artifacts", "show", "/no/such/uri"], {}, id="artifacts-show-unknown"),
        pytest.param(["lineage", "999999"], {}, id="lineage-unknown"),
        pytest.param(
            ["--metadata-url", "notaurl", "run", pipeline("storage_shared_a")],
            {},
            id="metadata-url-flag",
        ),
        pytest.param(
            ["run", pipeline("storage_shared_a")],
            {"HEADWATER_METADATA_URL": "foo://x"},
            id="metadata-url-env",
        ),
    ],
)
def test_bad_input_is_one_line(headwater: Cli, args: list[str], env: dict[str, str]) -> None:
    headwater.env.update(env)
    one_line(headwater(*args))


@pytest.mark.parametrize(
    ("args", "env"),
    [
        pytest.param(["--pipeline-root", "memory://lost"], {}, id="flag"),
        pytest.param([], {"HEADWATER_PIPELINE_ROOT": "memory://lost"}, id="env"),
    ],
)
def test_a_root_tasks_cannot_share_is_refused(
    headwater: Cli, args: list[str], env: dict[str, str]
) -> None:
    # Each task writes in its own process: a memory:// root used to lose every artifact.
    headwater.env.update(env)
    line = one_line(headwater.run("storage_shared_a", *args))
    assert "memory://lost" in line and "s3://" in line
    assert headwater.runs() == []


# --- PostgreSQL ------------------------------------------------------------------------------


def test_postgres_end_to_end(headwater: Cli, database_url: str) -> None:
    url = ["--metadata-url", database_url]
    first = run_ok(headwater(*url, "run", pipeline("storage_lineage"), "--json"))
    run_id = first["run_id"]

    listed = headwater(*url, "runs", "list", "--json").json()
    assert [(r["run_id"], r["state"]) for r in listed] == [(run_id, "SUCCEEDED")]
    assert listed[0]["metrics"] == pytest.approx({"accuracy": 0.9, "loss": 0.5})
    shown = headwater(*url, "runs", "show", run_id, "--json").json()
    model = output_uri(tasks_of(shown)["train"], "model")
    graph = headwater(*url, "lineage", model, "--upstream", "--json").json()
    tasks = {n.get("task") for n in graph["nodes"] if n["kind"] == "execution"}
    assert tasks == {"train", "make-dataset"}
    assert f"r:{run_id}" in {n["id"] for n in graph["nodes"]}

    rerun = run_ok(headwater(*url, "run", pipeline("storage_lineage"), "--json"))
    assert cached_flags(rerun) == {"make-dataset": True, "train": True, "evaluate": True}
    # Everything went to PostgreSQL: no SQLite store was made.
    assert not (headwater.home / "metadata.db").exists()


# --- a retry that is a cache hit ---------------------------------------------------------------


def test_retry_that_hits_the_cache_is_recorded_and_the_run_finishes(
    headwater: Cli, scratch: Path
) -> None:
    # One of two identical tasks fails once; by its retry (3 s later) the other has succeeded,
    # so the retry is a cache hit of a task whose first attempt is already recorded RUNNING.
    result = headwater.run_ok("storage_retry_hit", params={"flag_dir": str(scratch)})
    shown = headwater.show(result["run_id"])
    assert shown["state"] == "SUCCEEDED"
    states = sorted(task["state"] for task in shown["tasks"])
    assert states == ["CACHED", "SUCCEEDED"], shown["tasks"]
    assert all(task["state"] != "RUNNING" for task in shown["tasks"])
