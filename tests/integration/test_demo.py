"""`make demo`'s script end to end, on small data: the flagship pipeline, its summary, the
registered model, and the second run served from the cache."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def _demo(home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HEADWATER_HOME": str(home)}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "HEADWATER_DASK_SCHEDULER"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, str(DEMO), "--rows", "20000", "--rounds", "8"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _paste_next_steps(stdout: str, home: Path, cwd: Path) -> None:
    """Each next step the demo prints works pasted into a shell that has no HEADWATER_HOME
    (`make demo` sets it for the demo alone); the servers (`serve`, `ui`) are started with
    `--help` instead, to check that their line parses."""
    steps = stdout.split("  next:\n", 1)[1].splitlines()
    commands = [line.split("   # ")[0].strip() for line in steps if line.startswith("    ")]
    assert len(commands) == 6, stdout
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    bin_dir = str(Path(sys.executable).parent)  # where `headwater` is installed
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    for command in commands:
        assert command.startswith(f"HEADWATER_HOME={home} headwater "), command
        if " serve " in command or command.endswith(" ui"):
            command += " --help"
        done = subprocess.run(
            command, shell=True, env=env, cwd=cwd, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        assert "no runs" not in done.stderr and "no models" not in done.stderr, done.stderr
    lineage = next(c for c in commands if " lineage " in c)
    assert lineage.endswith(" lineage higgs-xgboost:1"), lineage


def _engines(home: Path, cwd: Path) -> dict[str, str]:
    """The engine each data step's first output artifact records, by task."""
    code = (
        "import json, headwater\n"
        "run = headwater.list_runs()[0]\n"
        "found = {}\n"
        "for task in headwater.get_run(run.run_id).tasks:\n"
        "    for uris in task.output_artifacts.values():\n"
        "        meta = headwater.get_artifact(uris[0]).metadata\n"
        "        if 'engine' in meta: found[task.name] = meta['engine']\n"
        "print(json.dumps(found))\n"
    )
    env = {**os.environ, "HEADWATER_HOME": str(home)}
    env.pop("HEADWATER_METADATA_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(found, dict)
    return found


# An end-to-end pipeline: ~30-60 s here, and CI machines under load were 3.5x slower.
@pytest.mark.timeout(360)
def test_demo_trains_registers_and_is_cached_the_second_time(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _demo(home, tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    auc = float(re.search(r"test AUC: ([0-9.]+)", first.stdout).group(1))  # type: ignore[union-attr]
    assert 0.6 < auc < 0.95, first.stdout  # learnable, not trivial
    for stage in ("generate-higgs", "preprocess", "train-xgboost", "evaluate-classifier"):
        assert re.search(rf"{stage}\s+[0-9.]+ s", first.stdout), first.stdout
    assert "registered model: higgs-xgboost v1 (xgboost" in first.stdout
    assert "headwater models promote higgs-xgboost 1 --stage production" in first.stdout
    assert "headwater serve higgs-xgboost:1" in first.stdout
    _paste_next_steps(first.stdout, home, tmp_path)
    # No cluster named: the data steps ran on Polars in their tasks' processes.
    assert _engines(home, tmp_path) == dict.fromkeys(
        ("generate-higgs", "groupby-summary", "preprocess"), "polars"
    )

    second = _demo(home, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert re.search(r"train-xgboost\s+cached", second.stdout), second.stdout
    assert f"test AUC: {auc:.4f}" in second.stdout
    assert "registered model: higgs-xgboost v1" in second.stdout  # not registered again
