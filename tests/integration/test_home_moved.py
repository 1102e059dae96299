"""A `HEADWATER_HOME` moved with `mv`, or copied with `cp -r`, works from its new place: runs,
logs, artifacts, lineage, cache hits and serving its registered model, through the real CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from cli_harness import Cli, cached_flags

pytestmark = [pytest.mark.integration, pytest.mark.slow]

pytest.importorskip("xgboost")
pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")


def moved(cli: Cli, home: Path) -> Cli:
    return cli._replace(home=home, env={**cli.env, "HEADWATER_HOME": str(home)})


def check_home(cli: Cli, run_id: str, *, full: bool = True) -> None:
    """Everything the store names is found under `cli.home`, and nothing under another; all
    the commands that show paths with `full`, else the run and the model."""
    shown = cli.show(run_id)
    for task in shown["tasks"]:
        assert task["log_path"].startswith(f"{cli.home}/runs/{run_id}/"), task
        assert Path(task["log_path"]).is_file(), task
        for uri in task["artifacts"]["outputs"].get("model", []):
            assert Path(uri, "model.ubj").is_file(), uri
    [model] = cli("models", "list", "--json").json()
    assert model["uri"].startswith(f"{cli.home}/artifacts/"), model
    if not full:
        return
    text = cli("runs", "show", run_id).stdout
    assert f"artifacts  {cli.home}/artifacts/relocate-model/{run_id}/" in text, text
    art = cli("artifacts", "show", model["uri"], "--json").json()
    assert art["uri"] == model["uri"]
    lineage = cli("lineage", "moved:1", "--upstream")
    assert lineage.returncode == 0 and f"{cli.home}/artifacts/" in lineage.stdout, lineage
    for other in ("home-a", "home-b", "home-c", "home-d"):
        if other != cli.home.name:
            assert f"/{other}/" not in lineage.stdout + text, text


@pytest.mark.timeout(300)
def test_a_moved_or_copied_home_works_from_its_new_place(headwater: Cli, tmp_path: Path) -> None:
    from test_serve_cli import serving

    first = moved(headwater, tmp_path / "home-a")
    run_id = first.run_ok("relocate_model")["run_id"]

    second = moved(headwater, tmp_path / "home-b")
    subprocess.run(["mv", str(first.home), str(second.home)], check=True)
    check_home(second, run_id)
    again = second.run_ok("relocate_model")
    assert cached_flags(again) == dict.fromkeys(cached_flags(again), True), again
    with serving(second, "moved:1") as (url, _):
        x = [[0.5, 0.1, 0.2, 0.3]]
        made = httpx.post(f"{url}/v1/models/moved:predict", json={"instances": x}, timeout=30)
        assert made.status_code == 200 and len(made.json()["predictions"]) == 1, made.text

    # A home from before Headwater kept its note: where it was is read from its runs.
    third = moved(headwater, tmp_path / "home-c")
    (second.home / "home-path").unlink()
    subprocess.run(["mv", str(second.home), str(third.home)], check=True)
    check_home(third, run_id, full=False)
    # A copy: the copy's paths follow it, the original keeps its own.
    fourth = moved(headwater, tmp_path / "home-d")
    shutil.copytree(third.home, fourth.home)
    check_home(fourth, run_id, full=False)
    check_home(third, run_id, full=False)
