"""`make demo`'s script end to end, on small data: the flagship pipeline, its summary, the
registered model, and the second run served from the cache."""

from __future__ import annotations

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

    second = _demo(home, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert re.search(r"train-xgboost\s+cached", second.stdout), second.stdout
    assert f"test AUC: {auc:.4f}" in second.stdout
    assert "registered model: higgs-xgboost v1" in second.stdout  # not registered again
