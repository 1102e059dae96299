"""Task logs are served only from the runs folder or the artifact store, whatever the store says.

A run's log paths come from its metadata records; these tests rewrite the record of a real
run's task to point elsewhere (a system file, `..` out of the runs folder, a symlink planted
in the runs folder) and check neither the tail nor the download reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from ui_harness import PIPELINE, Store, call

import headwater
from headwater import config
from headwater.metadata import open_store

SECRET = "top secret: not a log"


def point_log(run_id: str, task: str, target: str) -> None:
    """Rewrite the store's record of `task` so that its log path is `target`."""
    store = open_store()
    try:
        [record] = [e for e in store.list_executions(run_id) if e.task == task]
        store.record_execution(dataclasses.replace(record, log_path=target))
    finally:
        store.close()


@pytest.fixture(scope="module")
def run_id(store: Store) -> str:
    """A run of its own, so rewriting its records leaves the other tests' runs alone."""
    done = headwater.run(PIPELINE, {"rows": 2, "threshold": 0.3})
    assert done.state == "SUCCEEDED"
    return done.run_id


def passwd(tmp: Path, run_id: str) -> str:
    return "/etc/passwd"


def dot_dot(tmp: Path, run_id: str) -> str:
    secret = config.home() / "secret.txt"
    secret.write_text(SECRET)
    return str(config.runs_dir() / run_id / ".." / ".." / "secret.txt")


def planted_symlink(tmp: Path, run_id: str) -> str:
    secret = tmp / "secret.txt"
    secret.write_text(SECRET)
    link = config.runs_dir() / run_id / "tasks" / "planted.log"
    link.symlink_to(secret)
    return str(link)


def symlinked_folder(tmp: Path, run_id: str) -> str:
    (tmp / "outside").mkdir()
    (tmp / "outside" / "log.txt").write_text(SECRET)
    folder = config.runs_dir() / run_id / "escape"
    folder.symlink_to(tmp / "outside", target_is_directory=True)
    return str(folder / "log.txt")


@pytest.mark.parametrize(
    "target",
    [passwd, dot_dot, planted_symlink, symlinked_folder],
    ids=["etc-passwd", "dot-dot", "symlink-file", "symlink-folder"],
)
def test_log_outside_the_runs_folder_is_a_404(
    run_id: str, tmp_path: Path, target: Callable[[Path, str], str]
) -> None:
    point_log(run_id, "evaluate", target(tmp_path, run_id))
    base = f"/api/v1/runs/{run_id}/tasks/evaluate/log"
    for query in ("?tail=50", "?download=true", ""):
        response = call("GET", base + query)
        assert response.status_code == 404, (query, response.text[:200])
        assert set(response.json()) == {"error"}
        assert "outside the runs folder" in response.json()["error"]
        assert "root:" not in response.text and SECRET not in response.text


def test_log_beside_task_outputs_in_the_artifact_store_is_served(run_id: str) -> None:
    kept = Path(config.pipeline_root()) / run_id / "evaluate" / "log.txt"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("first\nkept beside the outputs\n")
    point_log(run_id, "evaluate", str(kept))
    base = f"/api/v1/runs/{run_id}/tasks/evaluate/log"
    assert call("GET", f"{base}?tail=1").text == "kept beside the outputs\n"
    full = call("GET", f"{base}?download=true")
    assert full.status_code == 200 and full.text == "first\nkept beside the outputs\n"
