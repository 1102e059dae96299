"""`follow_home`: a moved home's store follows it; what lies outside the home does not move."""

from __future__ import annotations

import shutil
from pathlib import Path

from headwater.metadata import ArtifactRecord, ExecutionRecord, RunRecord
from headwater.metadata.relocate import NOTE, follow_home
from headwater.metadata.sql import SqlMetadataStore

IR = {"pipelineInfo": {"name": "p"}, "root": {"dag": {"tasks": {}}}}


def _seed(home: Path) -> tuple[int, int, int, int]:
    """A run of the default store of `home`: its ids of an artifact under the home, one on
    S3 and one in a pipeline root of its own, and a task execution."""
    home.mkdir()
    with SqlMetadataStore(f"sqlite:///{home / 'metadata.db'}") as store:
        store.create_run(
            RunRecord("r", "p", "v1", "RUNNING", pipeline_root=f"{home}/artifacts"), ir=IR
        )
        inside = store.record_artifact(ArtifactRecord(uri=f"{home}/artifacts/p/r/t/m", name="m"))
        remote = store.record_artifact(ArtifactRecord(uri=f"s3://b{home}/m", name="s"))
        apart = store.record_artifact(ArtifactRecord(uri=f"{home}-other/m", name="o"))
        task = store.record_execution(
            ExecutionRecord(run_id="r", task="t", state="FAILED", log_path=f"{home}/runs/r/t.txt")
        )
        store.finish_run(
            "r",
            state="FAILED",
            outputs={"m": {"uri": f"{home}/artifacts/p/r/t/m"}},
            error={"task": "t", "log_path": f"{home}/runs/r/t.txt"},
            finished_at=1.0,
        )
    return inside, remote, apart, task


def test_a_moved_home_rewrites_what_is_under_it_and_nothing_else(tmp_path: Path) -> None:
    old, new = tmp_path / "a", tmp_path / "b"
    inside, remote, apart, task = _seed(old)
    (old / NOTE).write_text(str(old))
    shutil.move(old, new)

    assert follow_home(new, new / "metadata.db") == str(old)

    with SqlMetadataStore(f"sqlite:///{new / 'metadata.db'}", read_only=True) as store:
        run = store.get_run("r")
        assert run is not None and run.pipeline_root == f"{new}/artifacts"
        assert run.outputs == {"m": {"uri": f"{new}/artifacts/p/r/t/m"}}
        assert run.error is not None and run.error["log_path"] == f"{new}/runs/r/t.txt"
        execution = store.get_execution(task)
        assert execution is not None and execution.log_path == f"{new}/runs/r/t.txt"
        found = [store.get_artifact(i) for i in (inside, remote, apart)]
    uris = [a.uri if a is not None else None for a in found]
    assert uris == [f"{new}/artifacts/p/r/t/m", f"s3://b{old}/m", f"{old}-other/m"]
    assert (new / NOTE).read_text().strip() == str(new)
    assert follow_home(new, new / "metadata.db") is None  # once


def test_an_unmoved_home_without_a_note_is_left_alone_by_a_reader(tmp_path: Path) -> None:
    home = tmp_path / "a"
    _seed(home)
    before = (home / "metadata.db").read_bytes()
    assert follow_home(home, home / "metadata.db", note_unmoved=False) is None
    assert not (home / NOTE).exists() and (home / "metadata.db").read_bytes() == before
