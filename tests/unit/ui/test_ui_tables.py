"""The runs table: readable numbers, metric columns per pipeline, the executor and the mark
of a run the cache answered whole, from real runs in a temp HEADWATER_HOME."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_harness import ENV, PIPELINE, call

import headwater
from headwater.metadata.base import TaskCounts
from headwater.ui.tables import COMMON_COLUMNS, format_number, metric_columns, task_summary

WIDE = str(Path(__file__).parent / "pipelines" / "ui_wide.py")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (99510.0, "99,510"),
        (99510, "99,510"),
        (1234.5678, "1,234.57"),
        (-2500.5, "-2,500.5"),
        (0.87341, "0.8734"),
        (12.0, "12"),
        (0.5, "0.5"),
        (0.001234, "0.001234"),
        (1.2e-05, "1.2e-05"),
        (-3.5e-07, "-3.5e-07"),
        (0.0, "0"),
        (2.5e16, "2.5e+16"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (None, ""),
        (True, "True"),
        ("text", "text"),
    ],
    ids=lambda v: repr(v),
)
def test_format_number(value: Any, shown: str) -> None:
    assert format_number(value) == shown


def runs_of(**metrics: dict[str, float]) -> list[dict[str, Any]]:
    return [{"pipeline": p.split("_")[0], "metrics": m} for p, m in metrics.items()]


def test_one_pipeline_shows_all_its_metrics() -> None:
    page = runs_of(a_1={"loss": 1.0}, a_2={"accuracy": 0.5, "loss": 0.5})
    assert metric_columns(page) == {
        "pipelines": ["a"],
        "metrics": ["accuracy", "loss"],
        "columns": ["accuracy", "loss"],
    }


def test_several_pipelines_show_only_the_common_metrics() -> None:
    many = {f"m{i}": float(i) for i in range(10)}
    page = runs_of(
        a_1={"accuracy": 0.5, "auc": 0.1, **many},
        b_1={"accuracy": 0.7, "auc": 0.2, "loss": 0.3},
        b_2={"accuracy": 0.8},
        c_1={},  # a pipeline logging no metric leaves the common ones shown
    )
    found = metric_columns(page)
    assert found["pipelines"] == ["a", "b", "c"]
    assert len(found["metrics"]) == 13
    assert found["columns"] == ["accuracy", "auc"]  # most frequent first
    lots = runs_of(a_1=many, b_1=many)
    assert metric_columns(lots)["columns"] == [f"m{i}" for i in range(COMMON_COLUMNS)]
    assert metric_columns(runs_of(a_1={"x": 1.0}, b_1={"y": 1.0}))["columns"] == []
    assert metric_columns([]) == {"pipelines": [], "metrics": [], "columns": []}


@pytest.mark.parametrize(
    ("states", "run_state", "cached"),
    [
        ({"CACHED": 3}, "SUCCEEDED", True),
        ({"CACHED": 2, "SKIPPED": 1}, "SUCCEEDED", True),
        ({"CACHED": 2, "SUCCEEDED": 1}, "SUCCEEDED", False),
        ({"SKIPPED": 2}, "SUCCEEDED", False),
        ({"CACHED": 2}, "RUNNING", False),
        ({"CACHED": 1, "FAILED": 1}, "FAILED", False),
    ],
    ids=["all-hits", "hits-and-skipped", "one-ran", "only-skipped", "running", "failed"],
)
def test_a_run_is_all_cached_only_when_every_task_was_a_hit(
    states: dict[str, int], run_state: str, cached: bool
) -> None:
    summary = task_summary(TaskCounts(states, ["local"]), state=run_state)
    assert summary["cached"] is cached and summary["tasks"] == sum(states.values())
    assert task_summary(None, state="SUCCEEDED") == {"cached": False, "executor": "", "tasks": 0}
    assert task_summary(TaskCounts({"SUCCEEDED": 2}, ["dask", "local"]), state="SUCCEEDED")[
        "executor"
    ] == ("dask, local")


@pytest.fixture(scope="module")
def two_pipelines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """ui_demo run twice with the same arguments (the second all cached) and ui_wide once."""
    home = tmp_path_factory.mktemp("ui-tables") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADWATER_HOME", str(home))
        for name in ENV:
            mp.delenv(name, raising=False)
        ran = headwater.run(PIPELINE, {"rows": 3, "threshold": 0.5})
        again = headwater.run(PIPELINE, {"rows": 3, "threshold": 0.5})
        wide = headwater.run(WIDE, {})
        assert {r.state for r in (ran, again, wide)} == {"SUCCEEDED"}
        yield {"ran": ran.run_id, "again": again.run_id, "wide": wide.run_id}


def test_the_runs_api_gives_columns_executor_and_the_cached_mark(
    two_pipelines: dict[str, str],
) -> None:
    body = call("GET", "/api/v1/runs").json()
    runs = {r["run_id"]: r for r in body["runs"]}
    assert runs[two_pipelines["again"]]["cached"] is True
    assert runs[two_pipelines["ran"]]["cached"] is False
    assert runs[two_pipelines["ran"]]["executor"] == "local"
    assert runs[two_pipelines["again"]]["executor"] == ""  # nothing ran
    assert runs[two_pipelines["wide"]]["tasks"] == 1
    assert body["pipelines"] == ["ui-demo", "ui-wide"]
    assert len(body["metrics"]) == 27  # the union, for the column chooser
    assert body["columns"] == ["accuracy"]  # the one metric both log

    wide = call("GET", "/api/v1/runs?pipeline=ui-wide").json()
    assert wide["pipelines"] == ["ui-wide"] and len(wide["columns"]) == 26
    demo = call("GET", "/api/v1/runs?pipeline=ui-demo").json()
    assert demo["columns"] == ["accuracy", "rows"]


def test_the_runs_page_hides_other_metrics_and_formats_numbers(
    two_pipelines: dict[str, str],
) -> None:
    page = call("GET", "/").text
    assert 'data-scope="*"' in page
    assert '<th class="metric" data-col="metric:accuracy">accuracy</th>' in page
    assert '<th class="metric" data-col="metric:samples" hidden>samples</th>' in page
    assert page.count("all cached</span>") == 1
    assert re.search(r'<td data-col="executor">local</td>', page)
    one = call("GET", "/?pipeline=ui-wide").text
    assert 'data-scope="ui-wide"' in one
    assert '<th class="metric" data-col="metric:samples">samples</th>' in one
    for shown in (">99,510<", ">1.2e-05<", ">0.8734<", ">21,000.5<", ">100<"):
        assert shown in one, shown
    assert "e+04" not in one
