"""StoreTaskCache and ResumeCache against a real (in-memory SQLite) metadata store."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pytest

from headwater.artifacts import FsspecArtifactStore
from headwater.artifacts.base import content_digest
from headwater.caching.keys import cache_key
from headwater.caching.resume import ResumeCache
from headwater.caching.store import StoreTaskCache
from headwater.metadata import SqlMetadataStore
from headwater.metadata.base import ArtifactRecord, EventRecord, ExecutionRecord, RunRecord
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest


@pytest.fixture
def store() -> SqlMetadataStore:
    return SqlMetadataStore("sqlite://")


@pytest.fixture
def artifacts(tmp_path: Path) -> FsspecArtifactStore:
    return FsspecArtifactStore(str(tmp_path / "root"))


def make_launch(
    tmp_path: Path,
    *,
    inputs: dict[str, list[dict[str, Any]]] | None = None,
    params: dict[str, Any] | None = None,
    name: str = "task",
) -> Launch:
    executor_input = {
        "inputs": {
            "parameterValues": params or {"x": 1},
            "artifacts": {k: {"artifacts": v} for k, v in (inputs or {}).items()},
        },
        "outputs": {"parameters": {}, "artifacts": {}, "outputFile": str(tmp_path / "out.json")},
    }
    return Launch(
        task_id=1,
        name=name,
        component="comp-task",
        executor_label="exec-task",
        container={"image": "python:3.11", "command": ["python3"], "args": ["-c", "pass"]},
        executor_input=executor_input,
        placeholders=PlaceholderContext(executor_input=executor_input),
        workdir=tmp_path / "work",
        log_path=tmp_path / "work" / "log.txt",
        env={},
        resources=ResourceRequest(),
        output_types={},
        cache_enabled=True,
    )


def record_success(
    store: SqlMetadataStore,
    key: str,
    uri: str,
    *,
    run_id: str = "run-1",
    task: str = "task",
    outputs: dict[str, Any] | None = None,
) -> int:
    if store.get_run(run_id) is None:
        store.create_run(RunRecord(run_id, "p", "v1", "RUNNING", created_at=time.time()), ir={})
    execution_id = store.record_execution(
        ExecutionRecord(
            run_id=run_id,
            task=task,
            state="SUCCEEDED",
            cache_key=key,
            inputs={"x": 1},
            outputs={"Output": 7} if outputs is None else outputs,
            finished_at=time.time(),
        )
    )
    found = content_digest(uri)  # as the recorder takes it: digest and signature together
    artifact_id = store.record_artifact(
        ArtifactRecord(
            uri=uri,
            schema_title="system.Dataset",
            name="data",
            digest=found.hex if found else None,
            signature=found.signature if found else None,
            producer=execution_id,
            created_at=time.time(),
        )
    )
    store.record_event(EventRecord(execution_id, artifact_id, "OUTPUT", "data", 0))
    return execution_id


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_hit_returns_recorded_outputs(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "r" / "t" / "data", "rows")
    source = record_success(store, "k1", uri)
    hit = StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1")
    assert hit is not None
    assert hit.source == source
    assert hit.outputs.parameters == {"Output": 7}
    assert [a["uri"] for a in hit.outputs.artifacts["data"]] == [uri]


def test_unknown_key_and_empty_key_miss(store, artifacts, tmp_path) -> None:
    cache = StoreTaskCache(store, artifacts)
    assert cache.lookup(launch=make_launch(tmp_path), key="nope") is None
    assert cache.lookup(launch=make_launch(tmp_path), key="") is None


def test_a_trials_error_record_cached_by_an_earlier_version_is_never_reused(
    store, artifacts, tmp_path
) -> None:
    # Before tasks could mark a failed outcome, a failed trial was a SUCCEEDED execution whose
    # only trace of the failure is its output, recorded with its key like any success.
    uri = write(Path(artifacts.root) / "p" / "run-1" / "t" / "data", "rows")
    failure = {"Output": {"trial_index": 0.0, "error": "ValueError: diverged at x=0.5"}}
    record_success(store, "k1", uri, task="trial", outputs=failure)
    store_cache = StoreTaskCache(store, artifacts)
    assert store_cache.lookup(launch=make_launch(tmp_path, name="trial"), key="k1") is None
    resume = ResumeCache(store, artifacts, "run-1", store_cache)
    assert resume.lookup(launch=make_launch(tmp_path, name="trial"), key="") is None
    # A metric named "error" among others is a success.
    metrics = {"Output": {"trial_index": 0, "objective": {"error": 0.1}}, "error": 0.1}
    record_success(store, "k2", uri, task="train", outputs=metrics)
    assert store_cache.lookup(launch=make_launch(tmp_path), key="k2") is not None


def test_deleted_output_is_a_miss(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "r" / "t" / "data", "rows")
    record_success(store, "k1", uri)
    os.unlink(uri)
    assert StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1") is None


def test_output_changed_after_recording_is_a_miss(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "r" / "t" / "data", "rows")
    record_success(store, "k1", uri)
    time.sleep(0.01)
    write(Path(uri), "tampered")
    assert StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1") is None


def test_fingerprint_follows_input_content_not_uri(store, artifacts, tmp_path) -> None:
    cache = StoreTaskCache(store, artifacts)
    first = write(tmp_path / "a" / "in.csv", "1,2,3")
    second = write(tmp_path / "b" / "in.csv", "1,2,3")
    art = {"name": "in", "type": {"schemaTitle": "system.Dataset"}, "metadata": {}}
    key_a = cache.fingerprint(launch=make_launch(tmp_path, inputs={"d": [{**art, "uri": first}]}))
    key_b = cache.fingerprint(launch=make_launch(tmp_path, inputs={"d": [{**art, "uri": second}]}))
    assert key_a == key_b
    time.sleep(0.01)
    write(Path(second), "1,2,4")
    key_c = cache.fingerprint(launch=make_launch(tmp_path, inputs={"d": [{**art, "uri": second}]}))
    assert key_c != key_a


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"params": {"x": 2}}, "parameters", id="parameter-value"),
        pytest.param({"name": "other-task"}, None, id="task-name-is-not-in-the-key"),
    ],
)
def test_key_depends_on_values_not_names(tmp_path, change, field) -> None:
    base = cache_key(make_launch(tmp_path))
    changed = cache_key(make_launch(tmp_path, **change))
    assert (base != changed) == (field is not None)


def test_env_is_part_of_the_key(tmp_path) -> None:
    plain = make_launch(tmp_path)
    with_env = dataclasses.replace(make_launch(tmp_path), env={"MODE": "fast"})
    assert cache_key(plain) != cache_key(with_env)


def test_resume_reuses_the_runs_own_success_by_task_name(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "run-1" / "t" / "data", "rows")
    source = record_success(store, "", uri, task="prepare")
    cache = ResumeCache(store, artifacts, "run-1", StoreTaskCache(store, artifacts))
    hit = cache.lookup(launch=make_launch(tmp_path, name="prepare"), key="")
    assert hit is not None
    assert hit.resumed
    assert hit.source == source
    assert cache.lookup(launch=make_launch(tmp_path, name="train"), key="") is None


def test_resume_does_not_reuse_a_task_whose_input_was_rewritten(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "run-1" / "t" / "data", "rows")
    record_success(store, "", uri, task="train")
    data_in = write(tmp_path / "in" / "data.csv", "1,2")
    art = {"name": "d", "type": {"schemaTitle": "system.Dataset"}, "metadata": {}, "uri": data_in}
    launch = make_launch(tmp_path, name="train", inputs={"d": [art]})
    cache = ResumeCache(store, artifacts, "run-1", StoreTaskCache(store, artifacts))
    assert cache.lookup(launch=launch, key="") is None  # written after "train" finished
    changed = make_launch(tmp_path, name="train", params={"x": 2})
    assert cache.lookup(launch=changed, key="") is None  # other parameters


def test_a_file_deleted_from_a_directory_artifact_is_a_miss(store, artifacts, tmp_path) -> None:
    folder = Path(artifacts.root) / "p" / "r" / "t" / "data"
    write(folder / "a", "1")
    write(folder / "b", "2")
    record_success(store, "k1", str(folder))
    time.sleep(0.01)
    (folder / "b").unlink()
    assert StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1") is None


def test_what_a_directory_digest_covers(tmp_path) -> None:
    # The rule, once (artifacts/base.py): regular files, symlinks followed; FIFOs and
    # dangling symlinks hold no bytes and are left out.
    plain = tmp_path / "plain"
    write(plain / "a", "1")
    write(plain / "sub" / "b", "2")
    linked = tmp_path / "linked"
    write(linked / "a", "1")
    write(tmp_path / "outside" / "b", "2")
    os.symlink(tmp_path / "outside", linked / "sub")
    os.symlink("/nonexistent/target", linked / "dangling")
    os.mkfifo(linked / "pipe")
    os.symlink(linked, linked / "sub" / "loop")  # back up the tree: not followed again
    assert content_digest(str(linked)).hex == content_digest(str(plain)).hex
    (tmp_path / "outside" / "b").write_text("3")  # content behind a symlink counts
    assert content_digest(str(linked)).hex != content_digest(str(plain)).hex


def rewrite_keeping_times(path: Path, text: str) -> None:
    """Rewrite `path` in place and put its old atime and mtime back, as `cp -p`, `rsync -t`
    or a restore from backup leave a file."""
    before = os.stat(path)
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("shape", ["file", "directory"])
def test_an_output_rewritten_with_its_old_mtime_is_a_miss(store, artifacts, tmp_path, shape):
    folder = Path(artifacts.root) / "p" / "r" / "t" / "data"
    target = folder / "part-0" if shape == "directory" else folder
    write(target, "rows")
    record_success(store, "k1", str(folder))
    rewrite_keeping_times(target, "ROWS")  # same size, same mtime, other bytes
    assert StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1") is None


def test_an_output_touched_but_unchanged_is_still_a_hit(store, artifacts, tmp_path) -> None:
    uri = write(Path(artifacts.root) / "p" / "r" / "t" / "data", "rows")
    record_success(store, "k1", uri)
    rewrite_keeping_times(Path(uri), "rows")  # the signature moved; the content did not
    assert StoreTaskCache(store, artifacts).lookup(launch=make_launch(tmp_path), key="k1")


def test_an_input_rewritten_with_its_old_mtime_changes_the_key(store, artifacts, tmp_path):
    # The input is a recorded artifact of the store, whose digest the cache would reuse.
    uri = write(Path(artifacts.root) / "p" / "r" / "t" / "data", "1,2,3")
    record_success(store, "k0", uri)
    art = {"name": "d", "type": {"schemaTitle": "system.Dataset"}, "metadata": {}, "uri": uri}
    launch = make_launch(tmp_path, inputs={"d": [art]})
    before = StoreTaskCache(store, artifacts).fingerprint(launch=launch)
    rewrite_keeping_times(Path(uri), "1,2,4")
    assert StoreTaskCache(store, artifacts).fingerprint(launch=launch) != before


def test_resume_does_not_reuse_a_task_whose_input_was_rewritten_with_its_old_mtime(
    store, artifacts, tmp_path
) -> None:
    data_in = write(tmp_path / "in" / "data.csv", "1,2")
    uri = write(Path(artifacts.root) / "p" / "run-1" / "t" / "data", "rows")
    record_success(store, "", uri, task="train")  # finishes after data.csv was written
    art = {"name": "d", "type": {"schemaTitle": "system.Dataset"}, "metadata": {}, "uri": data_in}
    launch = make_launch(tmp_path, name="train", inputs={"d": [art]})
    cache = ResumeCache(store, artifacts, "run-1", StoreTaskCache(store, artifacts))
    assert cache.lookup(launch=launch, key="") is not None
    time.sleep(0.05)  # ctime is kept at the kernel's tick: let the rewrite land on a later one
    rewrite_keeping_times(Path(data_in), "9,9")
    assert cache.lookup(launch=launch, key="") is None
