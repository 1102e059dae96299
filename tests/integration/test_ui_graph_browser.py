"""The run graph in a real headless Chromium: fitted to its pane, zoomed and panned, loops
labelled by their items, conditions marked, large groups collapsed until clicked, and a run in
progress drawn whole (tasks still to start shown as pending).

Same harness as `test_ui_browser.py`: runs through the CLI into a temporary HEADWATER_HOME,
`headwater ui` in a subprocess, Debian's `chromium` driven by Playwright.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, pipeline, run_failed, run_ok
from test_ui_browser import CHROMIUM, TIMEOUT_MS, screenshot, sync_api
from test_ui_cli import ui_server

pytestmark = [pytest.mark.integration]
expect = sync_api.expect

UI_PLAN = Path(__file__).parents[1] / "unit" / "ui" / "pipelines" / "ui_plan.py"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    root = tmp_path_factory.mktemp("ui-graph")
    (root / "cwd").mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "headwater-home")}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    return Cli(root / "headwater-home", root / "cwd", env)


@pytest.fixture(scope="module")
def finished(home: Cli) -> dict[str, Any]:
    """A run of ui_plan taking the Else branch: 3 trainings, 10 squares, one report."""
    return run_ok(home("run", str(UI_PLAN), "--json", "--param", "mode=slow"))


@pytest.fixture(scope="module")
def base_url(home: Cli, finished: dict[str, Any]) -> Iterator[str]:
    with ui_server(home) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Any]:
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def open_graph(page: Any, run_id: str) -> Any:
    page.goto(f"/runs/{run_id}")
    expect(page.locator('svg#dag[data-ready="true"]')).to_have_count(1, timeout=TIMEOUT_MS)
    return page.locator("svg#dag")


def drawing(page: Any) -> dict[str, float]:
    box = page.locator("svg#dag #viewport").bounding_box()
    assert box is not None
    return box  # type: ignore[no-any-return]


def test_the_graph_fits_its_pane_and_zooms_and_pans(page: Any, finished: dict[str, Any]) -> None:
    svg = open_graph(page, finished["run_id"])
    pane = svg.bounding_box()
    fitted = drawing(page)
    assert pane["x"] <= fitted["x"] and fitted["x"] + fitted["width"] <= pane["x"] + pane["width"]
    assert pane["y"] <= fitted["y"] and fitted["y"] + fitted["height"] <= pane["y"] + pane["height"]
    scale = float(svg.get_attribute("data-scale"))

    page.locator("#zoom-in").click()
    zoomed = drawing(page)
    assert float(svg.get_attribute("data-scale")) == pytest.approx(scale * 1.25, rel=0.01)
    assert zoomed["width"] == pytest.approx(fitted["width"] * 1.25, rel=0.02)

    # The wheel zooms about the pointer; a drag on the background pans.
    page.mouse.move(pane["x"] + 20, pane["y"] + pane["height"] - 10)
    page.mouse.wheel(0, 300)
    assert float(svg.get_attribute("data-scale")) < scale * 1.25
    before = drawing(page)
    page.mouse.down()
    page.mouse.move(pane["x"] + 120, pane["y"] + pane["height"] - 50, steps=5)
    page.mouse.up()
    moved = drawing(page)
    assert (moved["x"] - before["x"], moved["y"] - before["y"]) == (
        pytest.approx(100, abs=1),
        pytest.approx(-40, abs=1),
    )
    expect(page.locator("#task-panel h2")).to_have_count(0)  # a drag is not a click

    page.locator("#zoom-fit").click()
    assert drawing(page) == pytest.approx(fitted, abs=1)


def test_iterations_conditions_durations_and_a_collapsed_group(
    page: Any, finished: dict[str, Any]
) -> None:
    open_graph(page, finished["run_id"])
    # The 10-iteration loop holds 11 nodes: one collapsed node until clicked.
    folded = page.locator('svg#dag g.node.collapsed-group[data-expands="for-loop-3"]')
    expect(folded).to_have_count(1)
    expect(folded.locator("text").first).to_have_text("▸ for-loop-3 (10 iterations)")
    expect(folded.locator(".node-state")).to_have_text("20 SUCCEEDED")  # tasks, folded ones too
    expect(page.locator('svg#dag g.node[data-task="square[0]"]')).to_have_count(0)
    # The loop over make-rates' output: its iterations are labelled by their items.
    labels = page.locator('svg#dag g.group.iteration[data-group^="for-loop-1["] .group-label')
    expect(labels).to_have_count(3)
    texts = [t.replace("▾", "").strip() for t in labels.all_text_contents()]
    assert sorted(texts) == ["lr=0.05", "lr=0.1", "lr=0.15"], texts
    # Finished tasks say how long they ran.
    state = page.locator('svg#dag g.node[data-task="train[0]"] .node-state')
    expect(state).to_have_text(re.compile(r"^SUCCEEDED · [0-9.]+ s$"))
    # Both branches are drawn, each marked with its condition and whether it was taken.
    taken = page.locator('svg#dag g.group.condition[data-group="condition-6"]')
    expect(taken.locator(".group-label")).to_contain_text("if not (mode == 'fast')")
    expect(taken.locator(".badge")).to_have_text("taken")
    skipped = page.locator('svg#dag g.group.condition[data-group="condition-5"]')
    expect(skipped.locator(".group-label")).to_contain_text("if mode == 'fast'")
    expect(skipped.locator(".badge")).to_have_text("not taken")
    screenshot(page, "graph-finished")

    folded.click()
    expect(page.locator('svg#dag g.group.loop[data-group="for-loop-3"]')).to_have_count(1)
    expect(page.locator('svg#dag g.node[data-task="square[0]"]')).to_be_visible()
    expect(page.locator('svg#dag g.node[data-task="for-loop-3:more"]')).to_be_visible()
    squares = page.locator('svg#dag g.group.iteration[data-group^="for-loop-3["] .group-label')
    texts = [t.replace("▾", "").strip() for t in squares.all_text_contents()]
    assert sorted(texts) == [f"x={i}" for i in range(5)], texts
    # The drawing was fitted to the pane again.
    pane, box = page.locator("svg#dag").bounding_box(), drawing(page)
    assert box["x"] >= pane["x"] - 1 and box["x"] + box["width"] <= pane["x"] + pane["width"] + 1
    # Its title folds it again.
    page.locator('svg#dag g.group[data-group="for-loop-3"] > .group-label').click()
    expect(folded).to_have_count(1)
    expect(page.locator('svg#dag g.node[data-task="square[0]"]')).to_have_count(0)


def test_a_run_in_progress_draws_its_whole_plan(page: Any, home: Cli) -> None:
    proc = home.popen(
        "run", str(UI_PLAN), "--param", "seconds=60", "--param", "n=2",
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        run_id = ""
        deadline = time.monotonic() + 60
        while not run_id:
            assert proc.poll() is None and time.monotonic() < deadline
            running = [r for r in home.runs("--state", "RUNNING")]
            run_id = running[0]["run_id"] if running else ""
            time.sleep(0.5)
        open_graph(page, run_id)
        train = page.locator('svg#dag g.node[data-task="train[1]"]')
        expect(train).to_have_class(re.compile(r"\bRUNNING\b"), timeout=60_000)
        # Not started yet, but drawn: what follows the loop, and both branches.
        for name in ("best", "report", "report-2"):
            node = page.locator(f'svg#dag g.node[data-task="{name}"]')
            expect(node).to_have_class(re.compile(r"\bPENDING\b.*\bplanned\b"))
            expect(node.locator(".node-state")).to_have_text("PENDING")
        expect(page.locator('svg#dag g.node[data-task="make-rates"] .node-state')).to_have_text(
            re.compile(r"^SUCCEEDED · [0-9.]+ s$")
        )
        badge = page.locator('svg#dag g.group.condition[data-group="condition-5"] .badge')
        expect(badge).to_have_text("not decided")
        screenshot(page, "graph-running")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_big_loop_is_drawn_folded_with_its_failures_first_and_its_list_pages(
    page: Any, home: Cli
) -> None:
    made = home("run", pipeline("big_loop"), "--json", "--param", "n=250", "--param",
                "fail_from=230")  # fmt: skip
    big = run_failed(made)
    failed = sorted(t["name"] for t in big["tasks"] if t["state"] == "FAILED")
    assert failed, big["tasks"]
    open_graph(page, big["run_id"])
    loop = page.locator('svg#dag g.group.loop[data-group^="for-loop"] > .group-label')
    expect(loop).to_contain_text("(250 iterations)")
    # Its failed iterations are drawn first, however far into the loop they are.
    for name in failed[:5]:
        node = page.locator(f'svg#dag g.node[data-task="{name}"]')
        expect(node).to_have_class(re.compile(r"\bFAILED\b"))
    more = page.locator('svg#dag g.node[data-task$=":more"]')
    expect(more).to_have_count(1)
    more.click()
    rows = page.locator("#task-panel table.folded tr")
    expect(rows).to_have_count(100)
    button = page.locator("#task-panel button.more-tasks")
    expect(button).to_contain_text("Show 100 more (100 of 245 shown)")
    button.click()
    expect(rows).to_have_count(200)
    screenshot(page, "graph-big-loop")
