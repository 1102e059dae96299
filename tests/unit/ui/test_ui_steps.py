"""Metrics over steps and a tuning's trials in the UI's API and pages, from real runs of
`pipelines/ui_steps.py` (in this process, into a temp HEADWATER_HOME), and the charts'
bounds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_harness import ENV, call

import headwater
from headwater.ui.charts import DRAWN_POINTS, MAX_LINES, line_chart_svg

PIPELINE = str(Path(__file__).parent / "pipelines" / "ui_steps.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`slow` (rate 0.2, with the trials), `fast` (rate 0.5) and `again` (as `fast`: a cache
    hit, whose series are recorded from the Metrics artifact it reuses)."""
    home = tmp_path_factory.mktemp("ui-steps") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADWATER_HOME", str(home))
        for name in ENV:
            mp.delenv(name, raising=False)
        slow = headwater.run(PIPELINE, {"rate": 0.2, "tune": True})
        fast = headwater.run(PIPELINE, {"rate": 0.5})
        again = headwater.run(PIPELINE, {"rate": 0.5})
        assert {slow.state, fast.state, again.state} == {"SUCCEEDED"}
        yield {"slow": slow.run_id, "fast": fast.run_id, "again": again.run_id}


def _losses(rate: float, epochs: int = 12) -> list[list[float]]:
    return [[e, (1 - rate) ** (e + 1)] for e in range(epochs)]


def _flat(points: list[list[float]]) -> list[float]:
    return [x for point in points for x in point]


def test_a_runs_steps_are_served_by_series_and_by_chart(runs: dict[str, str]) -> None:
    got = call("GET", f"/api/v1/runs/{runs['slow']}/steps").json()
    assert [(s["task"], s["name"], s["logged"]) for s in got["series"]] == [
        ("fit", "acc", 12),
        ("fit", "loss", 12),
    ]
    loss = got["series"][1]
    assert [p[0] for p in loss["points"]] == list(range(12))
    assert _flat(loss["points"]) == pytest.approx(_flat(_losses(0.2)))
    assert [c["name"] for c in got["charts"]] == ["acc", "loss"]
    assert [line["label"] for line in got["charts"][1]["lines"]] == ["fit"]


def test_a_cache_hit_has_the_series_of_the_artifact_it_reused(runs: dict[str, str]) -> None:
    shown = headwater.get_run(runs["again"])
    assert [t.cached for t in shown.tasks if t.name == "fit"] == [True]
    (fast,), (again,) = (
        [s for s in headwater.get_step_metrics([runs[k]]) if s.name == "loss"]
        for k in ("fast", "again")
    )
    assert again.points == fast.points
    assert _flat([list(p) for p in fast.points]) == pytest.approx(_flat(_losses(0.5)))


def test_the_run_page_draws_a_chart_per_metric_with_every_point(runs: dict[str, str]) -> None:
    page = call("GET", f"/runs/{runs['slow']}").text
    section = page[page.index('<section id="step-metrics">') :]
    charts = re.findall(r'<svg[^>]*class="step-chart"[^>]*data-metric="(\w+)"', section)
    assert charts == ["acc", "loss"]
    loss = section[section.index('data-metric="loss"') :]
    assert re.search(r'<g class="series" data-label="fit" data-points="12"', loss)
    assert loss[: loss.index("</svg>")].count("<circle") == 12


def test_the_compare_page_and_api_overlay_the_runs(runs: dict[str, str]) -> None:
    ids = f"{runs['slow']},{runs['fast']}"
    view = call("GET", f"/api/v1/compare?runs={ids}").json()
    (loss,) = [c for c in view["steps"]["charts"] if c["name"] == "loss"]
    assert [line["label"] for line in loss["lines"]] == [
        f"{runs['slow'][:8]} fit",
        f"{runs['fast'][:8]} fit",
    ]
    assert _flat(loss["lines"][1]["points"]) == pytest.approx(_flat(_losses(0.5)))
    page = call("GET", f"/compare?runs={ids}").text
    chart = page[page.index('data-metric="loss"') :]
    chart = chart[: chart.index("</svg>")]
    assert re.findall(r'data-label="([^"]+)" data-points="12"', chart) == [
        f"{runs['slow'][:8]} fit",
        f"{runs['fast'][:8]} fit",
    ]


def test_a_tuning_runs_trials_with_the_best_so_far(runs: dict[str, str]) -> None:
    got = call("GET", f"/api/v1/runs/{runs['slow']}/trials").json()
    assert (got["objective"], got["minimize"], got["parameters"]) == ("loss", True, ["x"])
    rows = [
        (t["trial"], t["round"], t["parameters"], t["status"], t["objective"], t["best_so_far"])
        for t in got["trials"]
    ]
    assert rows == [
        (0, 1, {"x": 0.9}, "COMPLETED", pytest.approx(0.36), pytest.approx(0.36)),
        (1, 1, {"x": -1}, "FAILED", None, pytest.approx(0.36)),
        (2, 1, {"x": 0.4}, "COMPLETED", pytest.approx(0.01), pytest.approx(0.01)),
    ]
    assert got["trials"][1]["error"] == "ValueError: diverged at x=-1"
    assert (got["best"], got["count"]) == (2, 3)
    page = call("GET", f"/runs/{runs['slow']}").text
    trials = page[page.index('<section id="trials">') :]
    assert re.findall(r'<tr class="trial (\w+)( best)?" data-trial="(\d)"', trials) == [
        ("COMPLETED", "", "0"),
        ("FAILED", "", "1"),
        ("COMPLETED", " best", "2"),
    ]
    assert trials.count('<circle class="trial') == 2 and 'class="trial failed"' in trials
    assert 'class="best-so-far"' in trials


def test_a_run_without_steps_or_trials_shows_neither(runs: dict[str, str]) -> None:
    got = call("GET", f"/api/v1/runs/{runs['fast']}/trials").json()
    assert got["trials"] == [] and got["objective"] is None
    page = call("GET", f"/runs/{runs['fast']}").text
    assert '<section id="trials">' not in page


def test_an_unknown_run_is_a_404_in_one_line(runs: dict[str, str]) -> None:
    for path in ("steps", "trials"):
        answer = call("GET", f"/api/v1/runs/no-such-run/{path}")
        assert answer.status_code == 404, answer.text
        said = answer.json()["error"]
        assert "no-such-run" in said and "\n" not in said


def test_charts_draw_a_bounded_number_of_lines_and_points() -> None:
    long = [(i, float(i % 7)) for i in range(10_000)]
    many: list[tuple[str, Any]] = [(f"t{i}", long) for i in range(MAX_LINES + 3)]
    svg = line_chart_svg("loss", many)
    drawn = [int(n) for n in re.findall(r'data-points="(\d+)"', svg)]
    assert len(drawn) == MAX_LINES and max(drawn) <= DRAWN_POINTS
    assert "+3 more not drawn" in svg and "<circle" not in svg  # long lines: no markers


def test_chart_labels_are_escaped_and_gaps_split_the_line() -> None:
    svg = line_chart_svg("<b>", [("<script>x</script>", [(0, 1.0), (1, None), (2, 3.0), (3, 2.0)])])
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "<b>" not in svg
    assert svg.count("<polyline") == 2  # 0 | gap | 2-3
    assert line_chart_svg("nothing", [("a", [(0, None)])]) == ""
    # Lines of tasks in one nested pipeline are named without its name.
    nested = line_chart_svg(
        "loss", [("tune.trial[0]", [(0, 1.0)]), ("tune.trial-2[0]", [(0, 2.0)])]
    )
    assert re.findall(r'data-label="([^"]+)"', nested) == ["trial[0]", "trial-2[0]"]
