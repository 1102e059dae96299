"""`headwater.step_metrics`: logging a metric over steps beside a KFP Metrics artifact, and
reading it back bounded (points per series, series per file, bytes per file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kfp.dsl import Metrics

from headwater import log_series, log_step
from headwater.step_metrics import MAX_POINTS, MAX_SERIES, downsample, read_steps


@pytest.fixture
def metrics(tmp_path: Path) -> Metrics:
    """A KFP Metrics artifact whose file is in tmp_path (its folder not made yet)."""
    artifact = Metrics(name="metrics", uri=str(tmp_path / "task" / "metrics"))
    artifact.path = str(tmp_path / "task" / "metrics")  # as KFP's executor maps the URI
    return artifact


def test_steps_go_to_the_file_and_the_last_value_to_the_metadata(metrics: Metrics) -> None:
    for epoch, loss in enumerate([0.9, 0.5, float("nan"), 0.25]):
        log_step(metrics, "loss", loss, step=epoch)
    log_step(metrics, "acc", 0.5)  # no step: 0, then 1, ...
    log_step(metrics, "acc", 0.75)
    assert metrics.metadata == {"loss": 0.25, "acc": 0.75}  # KFP's view: the final values
    lines = [json.loads(line) for line in Path(metrics.path).read_text().splitlines()]
    assert lines[0] == {"name": "loss", "step": 0, "value": 0.9}
    found = {s.name: s for s in read_steps(metrics.path)}
    assert found["loss"].points == [(0, 0.9), (1, 0.5), (2, None), (3, 0.25)]
    assert found["acc"].points == [(0, 0.5), (1, 0.75)] and found["acc"].logged == 2


def test_a_series_at_once_continues_after_the_last_step(metrics: Metrics) -> None:
    log_series(metrics, "rmse", [3.0, 2.0])
    log_series(metrics, "rmse", [1.5])
    log_series(metrics, "lr", [0.1, 0.01], steps=[0, 100])
    found = {s.name: s.points for s in read_steps(metrics.path)}
    assert found == {"rmse": [(0, 3.0), (1, 2.0), (2, 1.5)], "lr": [(0, 0.1), (100, 0.01)]}
    assert metrics.metadata == {"rmse": 1.5, "lr": 0.01}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: log_step(m, "", 1.0), "needs a name"),
        (lambda m: log_step(m, "loss", "high"), "'high' is not a number"),  # type: ignore[arg-type]
        (lambda m: log_step(m, "loss", 1.0, step=1.5), "step 1.5 is not a whole number"),  # type: ignore[arg-type]
        (lambda m: log_series(m, "loss", [1.0, 2.0], steps=[0]), "1 steps for 2 values"),
    ],
    ids=["no-name", "not-a-number", "fractional-step", "steps-and-values-differ"],
)
def test_bad_steps_are_refused_naming_the_metric(metrics: Metrics, call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(metrics)
    assert not Path(metrics.path).exists()  # nothing half-written


def test_a_long_series_is_cut_keeping_the_ends_and_the_spikes(metrics: Metrics) -> None:
    values = [1.0 / (1 + i) for i in range(10_000)]
    values[4321] = 50.0  # a spike
    log_series(metrics, "loss", values)
    (series,) = read_steps(metrics.path)
    assert series.logged == 10_000 and len(series.points) <= MAX_POINTS
    assert series.points[0] == (0, 1.0) and series.points[-1] == (9999, values[-1])
    assert (4321, 50.0) in series.points
    assert [p[0] for p in series.points] == sorted(p[0] for p in series.points)


def test_downsampling_keeps_short_series_whole() -> None:
    points = [(i, float(i)) for i in range(10)]
    assert downsample(points, 10) == points
    cut = downsample(points, 6)
    assert cut[0] == points[0] and cut[-1] == points[-1] and len(cut) <= 6


def test_files_that_are_not_step_files_have_no_series(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_text("accuracy,0.9\n")
    assert read_steps(str(other)) == []
    assert read_steps(str(tmp_path / "missing")) == []
    assert read_steps(str(tmp_path)) == []  # a folder
    mixed = tmp_path / "mixed"
    mixed.write_text('{"name": "a", "step": 0, "value": 1}\nnot json\n{"name": "a", "step": 1}\n')
    (series,) = read_steps(str(mixed))
    assert series.points == [(0, 1.0), (1, None)]


def test_series_and_bytes_read_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "many"
    lines = [json.dumps({"name": f"m{i:04}", "step": 0, "value": i}) for i in range(MAX_SERIES + 5)]
    path.write_text("\n".join(lines) + "\n")
    assert len(read_steps(str(path))) == MAX_SERIES
    # A read cut inside a line drops that line, never a wrong value.
    size = len(lines[0]) + 1 + len(lines[1]) // 2
    assert [s.name for s in read_steps(str(path), max_bytes=size)] == ["m0000"]
