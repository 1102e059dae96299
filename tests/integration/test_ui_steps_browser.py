"""Metrics over steps and a tuning's trials, drawn in a real headless Chromium.

Runs of `tests/unit/ui/pipelines/ui_steps.py` (12 epochs of a loss and an accuracy logged with
`headwater.log_step`; three trials through the real trial wrapper, one failing) go through
the CLI into a temporary HEADWATER_HOME, `headwater ui` serves them, and Debian's `chromium`
renders the run page (a chart per metric with every point, the trials table and chart) and
the compare page (the two runs' lines overlaid in one chart). Harness as `test_ui_browser.py`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, run_ok
from test_ui_browser import CHROMIUM, SCREENSHOT_DIR, TIMEOUT_MS, sync_api
from test_ui_cli import ui_server

pytestmark = [pytest.mark.integration]

expect = sync_api.expect
UI_STEPS = Path(__file__).parents[1] / "unit" / "ui" / "pipelines" / "ui_steps.py"


def screenshot(target: Any, name: str) -> None:
    """A page (whole) or a locator, to `$HEADWATER_UI_SCREENSHOTS/<name>.png` when set."""
    if SCREENSHOT_DIR:
        path = str(Path(SCREENSHOT_DIR) / f"{name}.png")
        if hasattr(target, "goto"):
            target.screenshot(path=path, full_page=True)
        else:
            target.screenshot(path=path)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    root = tmp_path_factory.mktemp("ui-steps-browser")
    (root / "cwd").mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "home")}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    return Cli(root / "home", root / "cwd", env)


@pytest.fixture(scope="module")
def runs(home: Cli) -> dict[str, str]:
    """`slow` (rate 0.2, with three trials) and `fast` (rate 0.5), 12 epochs each."""
    made = {}
    for key, params in (("slow", ["rate=0.2", "tune=true"]), ("fast", ["rate=0.5"])):
        args = [a for p in params for a in ("--param", p)]
        made[key] = run_ok(home("run", str(UI_STEPS), "--json", *args))["run_id"]
    return made


@pytest.fixture(scope="module")
def page(home: Cli, runs: dict[str, str]) -> Iterator[Any]:
    assert CHROMIUM is not None
    with ui_server(home) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(TIMEOUT_MS)
        opened = context.new_page()
        errors: list[str] = []
        opened.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            yield opened
        finally:
            browser.close()
        assert not errors, f"JavaScript errors on the page: {errors}"


def test_the_run_page_charts_each_metric_with_every_epoch(page: Any, runs: dict[str, str]) -> None:
    page.goto(f"/runs/{runs['slow']}")
    charts = page.locator("#step-metrics svg.step-chart")
    expect(charts).to_have_count(2)
    assert charts.evaluate_all("cs => cs.map(c => c.dataset.metric)") == ["acc", "loss"]
    loss = page.locator('#step-metrics svg.step-chart[data-metric="loss"]')
    expect(loss).to_be_visible()
    series = loss.locator("g.series")
    expect(series).to_have_count(1)
    expect(series).to_have_attribute("data-points", "12")
    expect(series.locator("circle")).to_have_count(12)
    # The loss falls every epoch: each point is drawn lower than the one before (SVG y grows
    # downwards), so the chart is the data, not just 12 marks.
    ys = series.locator("circle").evaluate_all("cs => cs.map(c => c.cy.baseVal.value)")
    assert ys == sorted(ys) and len(set(ys)) == 12, ys
    box = loss.bounding_box()
    assert box["width"] > 300 and box["height"] > 150, box
    screenshot(page.locator("#step-metrics"), "steps-run")


def test_the_compare_page_overlays_two_runs(page: Any, runs: dict[str, str]) -> None:
    page.goto(f"/compare?runs={runs['slow']},{runs['fast']}")
    loss = page.locator('#step-metrics svg.step-chart[data-metric="loss"]')
    expect(loss).to_be_visible()
    series = loss.locator("g.series")
    expect(series).to_have_count(2)
    labels = series.evaluate_all("gs => gs.map(g => g.dataset.label)")
    assert labels == [f"{runs['slow'][:8]} fit", f"{runs['fast'][:8]} fit"]
    for k in range(2):
        expect(series.nth(k).locator("circle")).to_have_count(12)
    # Two lines in two colours, the faster decay below the slower after the first epoch.
    colours = series.evaluate_all("gs => gs.map(g => getComputedStyle(g).stroke)")
    assert len(set(colours)) == 2, colours
    last = [
        series.nth(k).locator("circle").last.evaluate("c => c.cy.baseVal.value") for k in range(2)
    ]
    assert last[1] > last[0], last
    screenshot(page, "steps-compare")


def test_a_tuning_run_shows_its_trials_and_the_best_so_far(page: Any, runs: dict[str, str]) -> None:
    page.goto(f"/runs/{runs['slow']}")
    section = page.locator("#trials")
    expect(section).to_be_visible()
    rows = section.locator("table.trials tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(1)).to_contain_text("FAILED")
    expect(rows.nth(1)).to_contain_text("diverged at x=-1")
    expect(section.locator("tr.best")).to_have_attribute("data-trial", "2")
    chart = section.locator("svg.trials-chart")
    expect(chart.locator("circle.trial")).to_have_count(2)
    expect(chart.locator("path.trial.failed")).to_have_count(1)
    best = chart.locator("polyline.best-so-far")
    expect(best).to_have_count(1)
    # The best so far only ever goes down (minimize): its y never rises along the trials.
    ys = [float(xy.split(",")[1]) for xy in best.get_attribute("points").split()]
    assert ys == sorted(ys) and ys[0] < ys[-1], ys
    expect(section).to_contain_text(re.compile(r"minimize\s+loss"))
    screenshot(section, "steps-trials")
