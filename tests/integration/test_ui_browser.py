"""The web UI end to end in a real headless Chromium driven by Playwright.

Real parts only: pipelines run through the CLI into a temporary HEADWATER_HOME, `headwater ui`
serves them from a subprocess on a free loopback port, and Debian's `chromium` (never a browser
download) renders the pages: the run graph and its task panel, the ROC plot of a
ClassificationMetrics artifact, the comparison of two runs, starting a run from the form, and a
long ParallelFor loop drawn as a box of iteration boxes, and downloading a profiler trace.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, pipeline, run_ok
from test_ui_cli import ui_server

pytestmark = [pytest.mark.integration]

CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and os.path.exists(p)), None
)
if CHROMIUM is None:
    pytest.skip("no chromium browser (Debian package `chromium`)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing")
expect = sync_api.expect

TIMEOUT_MS = 20_000  # generous: CI machines are slow and share their CPUs
# Where a screenshot of the run page is written for a person to look at (unset: not taken).
SCREENSHOT_DIR = os.environ.get("HEADWATER_UI_SCREENSHOTS")


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOT_DIR:
        page.screenshot(path=str(Path(SCREENSHOT_DIR) / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def headwater_home(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """The CLI with its own HEADWATER_HOME, shared by this module's tests."""
    root = tmp_path_factory.mktemp("ui-browser")
    cwd = root / "cwd"
    cwd.mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "headwater-home")}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES"):
        env.pop(name, None)
    return Cli(root / "headwater-home", cwd, env)


@pytest.fixture(scope="module")
def runs(headwater_home: Cli) -> dict[str, dict[str, Any]]:
    """Two finished runs of the ui_roc pipeline with different `shift` parameters."""
    return {
        "low": run_ok(headwater_home.run("ui_roc", params={"shift": 0.1})),
        "high": run_ok(headwater_home.run("ui_roc", params={"shift": 0.2})),
    }


UI_LOOPS = Path(__file__).parents[1] / "unit" / "ui" / "pipelines" / "ui_loops.py"


@pytest.fixture(scope="module")
def loop_run(headwater_home: Cli) -> dict[str, Any]:
    """A run of a 12-iteration loop whose iteration 9 fails, once the others have run (so the
    run fails)."""
    marks = f"marks={headwater_home.home / 'loop-marks'}"
    done = headwater_home("run", str(UI_LOOPS), "--json", "--param", "fail_on=81", "--param", marks)
    assert done.result is not None and done.result["state"] == "FAILED", done.describe()
    return done.result


@pytest.fixture(scope="module")
def base_url(headwater_home: Cli, runs: dict[str, dict[str, Any]]) -> Iterator[str]:
    with ui_server(headwater_home) as base:
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


def test_run_page_draws_the_graph_and_shows_a_task(
    page: Any, runs: dict[str, dict[str, Any]]
) -> None:
    run = runs["low"]
    page.goto(f"/runs/{run['run_id']}")
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=TIMEOUT_MS)
    nodes = page.locator("svg#dag g.node")
    expect(nodes).to_have_count(len(run["tasks"]), timeout=TIMEOUT_MS)
    for task in run["tasks"]:
        node = page.locator(f'svg#dag g.node[data-task="{task["name"]}"]')
        expect(node).to_have_class(re.compile(r"\bSUCCEEDED\b"), timeout=TIMEOUT_MS)
        # The state, and how long the task ran.
        expect(node.locator(".node-state")).to_have_text(
            re.compile(r"^SUCCEEDED · [0-9.]+ s$"), timeout=TIMEOUT_MS
        )
        expect(node).to_be_visible(timeout=TIMEOUT_MS)
    # The succeeded colour (green, style.css) is applied, not the grey of a pending node.
    fills = page.locator("svg#dag g.node rect").evaluate_all(
        "rs => rs.map(r => getComputedStyle(r).fill)"
    )
    assert fills == ["rgb(215, 240, 216)"] * len(run["tasks"]), fills
    # dagre's layout replaced the server's: edges are polylines, prepare above evaluate.
    expect(page.locator("svg#dag polyline.edge")).to_have_count(1, timeout=TIMEOUT_MS)
    top = {
        name: page.locator(f'svg#dag g.node[data-task="{name}"]').bounding_box()["y"]
        for name in ("prepare", "evaluate")
    }
    assert top["prepare"] < top["evaluate"], top
    screenshot(page, "run-page")

    page.locator('svg#dag g.node[data-task="evaluate"]').click()
    expect(page.locator('svg#dag g.node[data-task="evaluate"]')).to_have_class(
        re.compile(r"\bselected\b"), timeout=TIMEOUT_MS
    )
    panel = page.locator("#task-panel")
    expect(panel.locator("h2")).to_have_text("evaluate", timeout=TIMEOUT_MS)
    expect(panel.locator("pre.log")).to_contain_text(
        "evaluated 20 examples: accuracy 0.8", timeout=TIMEOUT_MS
    )
    # The whole log, and each artifact the task read or wrote, to download.
    log = panel.locator('a[href$="/log?download=true"]')
    expect(log).to_have_text("download", timeout=TIMEOUT_MS)
    artifacts = panel.locator("a.download")
    expect(artifacts.first).to_have_attribute(
        "href", re.compile(r"^/api/v1/artifacts/\d+/download$")
    )


def test_a_kfp_client_run_link_opens_the_run(page: Any, runs: dict[str, dict[str, Any]]) -> None:
    run_id = runs["low"]["run_id"]
    page.goto(f"/#/runs/details/{run_id}")  # as kfp.Client prints it
    page.wait_for_url(f"**/runs/{run_id}", timeout=TIMEOUT_MS)
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=TIMEOUT_MS)


def test_a_click_before_the_run_has_loaded_opens_the_task_once_it_has(
    page: Any, runs: dict[str, dict[str, Any]]
) -> None:
    # Hold the run's JSON back: the graph is on the page (server-rendered) before it arrives,
    # and a click then must not be lost (under load, it was: the panel stayed empty).
    held: list[Any] = []
    pattern = re.compile(r"/api/v1/runs/[^/?]+(\?.*)?$")
    page.route(pattern, lambda route: held.append(route))
    try:
        page.goto(f"/runs/{runs['low']['run_id']}")
        for _ in range(100):
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page never asked for the run"
        page.locator('svg#dag g.node[data-task="evaluate"]').click()
        panel = page.locator("#task-panel")
        expect(panel.locator("h2")).to_have_count(0)
        held[0].continue_()
        expect(panel.locator("h2")).to_have_text("evaluate", timeout=TIMEOUT_MS)
    finally:
        page.unroute(pattern)


def test_classification_artifact_draws_the_roc_curve(
    page: Any, runs: dict[str, dict[str, Any]]
) -> None:
    page.goto(f"/runs/{runs['low']['run_id']}")
    page.locator('svg#dag g.node[data-task="evaluate"]').click()
    row = page.locator("#task-panel tr", has=page.locator("th", has_text="classification"))
    row.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("ClassificationMetrics", timeout=TIMEOUT_MS)
    curve = page.locator("svg.roc polyline.roc-curve")
    expect(curve).to_have_count(1, timeout=TIMEOUT_MS)
    points = curve.get_attribute("points") or ""
    assert len(points.split()) == 4, points
    box = curve.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100, box
    expect(page.locator("svg.roc circle")).to_have_count(4, timeout=TIMEOUT_MS)
    # The confusion matrix heatmap is drawn too: 2 x 2 cells.
    expect(page.locator("svg.confusion rect")).to_have_count(4, timeout=TIMEOUT_MS)
    screenshot(page, "artifact-page")


def test_compare_two_runs_highlights_differences(
    page: Any, runs: dict[str, dict[str, Any]]
) -> None:
    page.goto("/")
    for run in runs.values():
        page.locator(f'input.pick[value="{run["run_id"]}"]').check()
    page.locator("#compare").click()
    expect(page).to_have_url(re.compile(r"/compare\?"), timeout=TIMEOUT_MS)
    expect(page.locator("h1")).to_have_text("Compare 2 runs", timeout=TIMEOUT_MS)
    shift = page.locator("table.compare tr", has=page.locator("th", has_text=re.compile("^shift$")))
    expect(shift).to_have_class(re.compile(r"\bdiffers\b"), timeout=TIMEOUT_MS)
    count = page.locator("table.compare tr", has=page.locator("th", has_text=re.compile("^count$")))
    expect(count).to_have_class(re.compile(r"\bsame\b"), timeout=TIMEOUT_MS)
    accuracy = page.locator("table.compare tr.differs", has_text="accuracy")
    expect(accuracy).to_have_count(1, timeout=TIMEOUT_MS)
    # A highlighted row looks different from an unchanged one.
    colours = [row.evaluate("r => getComputedStyle(r).backgroundColor") for row in (shift, count)]
    assert colours[0] != colours[1] and colours[0] != "rgba(0, 0, 0, 0)", colours
    expect(page.locator(".plots svg.roc polyline.roc-curve")).to_have_count(2, timeout=TIMEOUT_MS)
    # The legend names each run's curve in full (not clipped by the plot's width).
    for label in page.locator(".plots svg.roc text[fill]").all():
        plot = page.locator(".plots svg.roc").bounding_box()
        box = label.bounding_box()
        assert plot and box and box["x"] + box["width"] <= plot["x"] + plot["width"], (box, plot)
    screenshot(page, "compare-page")


def test_start_a_run_from_the_form(page: Any) -> None:
    page.goto("/runs/new")
    page.locator('input[name="path"]').fill(pipeline("ui_roc"))
    page.get_by_role("button", name="Load").click()
    shift = page.locator("#p-shift")
    expect(shift).to_be_visible(timeout=TIMEOUT_MS)
    shift.fill("0.15")
    expect(page.locator("#launch")).to_be_enabled()  # by launch.js, which posts the form
    page.locator("#launch").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]{36}$"), timeout=TIMEOUT_MS)
    # The page updates itself while the run goes on (polling the API, reloading at the end).
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=60_000)
    expect(page.locator("svg#dag g.node")).to_have_count(2, timeout=TIMEOUT_MS)
    expect(page.locator("table.kv tr", has_text="shift")).to_contain_text("0.15")


def within(inner: dict[str, float] | None, outer: dict[str, float] | None) -> bool:
    assert inner is not None and outer is not None
    return (
        outer["x"] <= inner["x"] + 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and outer["y"] <= inner["y"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


def test_a_loop_is_a_box_of_iteration_boxes_with_the_rest_folded(
    page: Any, loop_run: dict[str, Any]
) -> None:
    page.goto(f"/runs/{loop_run['run_id']}")
    expect(page.locator("#run-state")).to_have_text("FAILED", timeout=TIMEOUT_MS)
    loop = page.locator('svg#dag g.group.loop[data-group="for-loop-2"]')
    expect(loop.locator(".group-label")).to_have_text(
        "▾ for-loop-2 (12 iterations)", timeout=TIMEOUT_MS
    )
    # Five iterations drawn: the failed one (9) although it is past the first five.
    labels = page.locator("svg#dag g.group.iteration .group-label")
    expect(labels).to_have_text([f"▾ x={i}" for i in (0, 1, 2, 3, 9)], timeout=TIMEOUT_MS)
    loop_box = loop.locator("rect").bounding_box()
    for i in (0, 1, 2, 3, 9):
        box = page.locator(f'svg#dag g.group[data-group="for-loop-2[{i}]"] rect').bounding_box()
        assert within(box, loop_box), (i, box, loop_box)
        for task in ("square", "check"):
            node = page.locator(f'svg#dag g.node[data-task="{task}[{i}]"]')
            state = "FAILED" if (task, i) == ("check", 9) else "SUCCEEDED"
            expect(node).to_have_class(re.compile(rf"\b{state}\b"), timeout=TIMEOUT_MS)
            expect(node.locator(".node-state")).to_have_text(
                re.compile(rf"^{state} · [0-9.]+ s$"), timeout=TIMEOUT_MS
            )
            assert within(node.bounding_box(), box), (task, i)
    fills = page.locator('svg#dag g.node[data-task="check[9]"] rect').evaluate_all(
        "rs => rs.map(r => getComputedStyle(r).fill)"
    )
    assert fills == ["rgb(248, 212, 212)"], fills  # the failed colour (style.css)
    more = page.locator('svg#dag g.node.more[data-task="for-loop-2:more"]')
    expect(more.locator("text").first).to_have_text("+7 more iterations", timeout=TIMEOUT_MS)
    expect(more.locator(".node-state")).to_have_text("14 SUCCEEDED", timeout=TIMEOUT_MS)
    assert within(more.bounding_box(), loop_box)
    assert not within(page.locator('svg#dag g.node[data-task="total"]').bounding_box(), loop_box)
    expect(page.locator('svg#dag g.node[data-task="check[10]"]')).to_have_count(0)
    screenshot(page, "loop-run-page")

    # The folded iterations' tasks are listed in the panel, and each opens its task.
    more.click()
    panel = page.locator("#task-panel")
    expect(panel.locator("h2")).to_have_text("+7 more iterations", timeout=TIMEOUT_MS)
    expect(panel.locator("table.folded tr")).to_have_count(14, timeout=TIMEOUT_MS)
    panel.locator('a[data-task="check[10]"]').click()
    expect(panel.locator("h2")).to_have_text("check[10]", timeout=TIMEOUT_MS)
    expect(panel.locator("span.state").first).to_have_text("SUCCEEDED", timeout=TIMEOUT_MS)

    page.goto(f"/runs/{loop_run['run_id']}?iterations=12")
    expect(page.locator("svg#dag g.group.iteration")).to_have_count(12, timeout=TIMEOUT_MS)
    expect(page.locator("svg#dag g.node.more")).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator("svg#dag g.node")).to_have_count(25, timeout=TIMEOUT_MS)


def test_artifact_page_downloads_a_profiler_trace(page: Any, headwater_home: Cli) -> None:
    pytest.importorskip("torch", reason="the profiler trace is made with torch")
    profile = UI_LOOPS.with_name("ui_profile.py")
    done = run_ok(headwater_home("run", str(profile), "--json"))
    page.goto(f"/runs/{done['run_id']}")
    page.locator('svg#dag g.node[data-task="profile"]').click()
    row = page.locator("#task-panel tr", has=page.locator("th", has_text="profile_trace"))
    row.locator("a").first.click()
    expect(page.locator("h2", has_text="Profiler traces")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("p.trace-how")).to_contain_text("chrome://tracing", timeout=TIMEOUT_MS)
    with page.expect_download(timeout=TIMEOUT_MS) as info:
        page.locator("a.trace-download").click()
    download = info.value
    assert download.suggested_filename == "trace.json.gz"
    events = json.loads(gzip.decompress(Path(download.path()).read_bytes()))["traceEvents"]
    assert any(str(e.get("name", "")).startswith("aten::") for e in events)


def test_an_html_report_shows_its_inline_image_and_a_digits_matrix_draws(
    page: Any, headwater_home: Cli
) -> None:
    kinds = UI_LOOPS.with_name("ui_kinds.py")
    done = run_ok(headwater_home("run", str(kinds), "--json"))
    page.goto(f"/runs/{done['run_id']}")
    page.locator('svg#dag g.node[data-task="metrics-kinds"]').click()
    row = page.locator("#task-panel tr", has=page.locator("th", has_text="page"))
    row.locator("a").first.click()
    # The report's image is a data: URI inside a sandboxed srcdoc iframe: drawn, not broken.
    image = page.frame_locator("iframe.html-artifact").locator("img")
    expect(image).to_be_visible(timeout=TIMEOUT_MS)
    assert image.evaluate("i => i.complete && i.naturalWidth") == 320
    screenshot(page, "html-report")
    page.go_back()
    page.locator('svg#dag g.node[data-task="metrics-kinds"]').click()
    row = page.locator("#task-panel tr", has=page.locator("th", has_text="digits"))
    row.locator("a").first.click()
    expect(page.locator("svg.confusion rect")).to_have_count(9, timeout=TIMEOUT_MS)
    expect(page.locator(".plots p")).to_contain_text("No ROC curve", timeout=TIMEOUT_MS)


UI_WIDE = UI_LOOPS.with_name("ui_wide.py")


@pytest.fixture(scope="module")
def wide_runs(headwater_home: Cli, runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Two runs of ui_wide (26 metrics, beside ui_roc's one): the second all cached."""
    first = run_ok(headwater_home("run", str(UI_WIDE), "--json"))
    again = run_ok(headwater_home("run", str(UI_WIDE), "--json"))
    assert [t["cached"] for t in again["tasks"]] == [True], again
    return [first, again]


def widths(page: Any) -> dict[str, float]:
    """The document's width, the viewport's, and the runs table's and its scroller's."""
    return dict(
        page.evaluate(
            """() => {
              const scroller = document.querySelector(".table-scroll");
              return {doc: document.documentElement.scrollWidth, view: window.innerWidth,
                      right: scroller.getBoundingClientRect().right,
                      table: document.querySelector("table.runs").scrollWidth,
                      box: scroller.clientWidth};
            }"""
        )
    )


def shown_headings(page: Any) -> list[str]:
    return [t.strip() for t in page.locator("table.runs thead th:visible").all_inner_texts()]


def test_runs_table_fits_the_window_and_remembers_its_columns(
    page: Any, runs: dict[str, dict[str, Any]], wide_runs: list[dict[str, Any]]
) -> None:
    first, again = (r["run_id"] for r in wide_runs)
    page.goto("/")
    expect(page.locator(f'tr[data-run="{again}"] .cached-mark')).to_have_text("all cached")
    expect(page.locator(f'tr[data-run="{first}"] .cached-mark')).to_have_count(0)
    expect(page.locator(f'tr[data-run="{first}"] td[data-col="executor"]')).to_have_text("local")
    # Two pipelines: only the metric both log is a column, and the table fits the window.
    assert "accuracy" in shown_headings(page) and "samples" not in shown_headings(page)
    size = widths(page)
    assert size["doc"] <= size["view"] and size["table"] <= size["box"], size

    chooser = page.locator("details#columns")
    chooser.locator("summary").click()
    chooser.locator('input[data-col="metric:samples"]').check()
    chooser.locator('input[data-col="created"]').uncheck()
    samples = page.locator(f'tr[data-run="{first}"] td[data-col="metric:samples"]')
    expect(samples).to_have_text("99,510")
    expect(page.locator('th[data-col="created"]')).to_be_hidden()
    screenshot(page, "runs-table")
    # Remembered for "all pipelines" across page loads.
    page.reload()
    expect(samples).to_be_visible()
    expect(page.locator('th[data-col="created"]')).to_be_hidden()
    saved = page.evaluate("() => localStorage.getItem('headwater.runs.columns:*')")
    assert json.loads(saved) == {"on": ["metric:samples"], "off": ["created"]}

    # Every column on: the table scrolls in its box, the page stays as wide as the window.
    page.locator("details#columns summary").click()
    for box in page.locator("details#columns input[data-col]").all():
        box.check()
    size = widths(page)
    assert size["table"] > size["box"] and size["doc"] <= size["view"], size
    page.locator("#columns-reset").click()
    expect(samples).to_be_hidden()
    expect(page.locator('th[data-col="created"]')).to_be_visible()
    assert page.evaluate("() => localStorage.getItem('headwater.runs.columns:*')") is None

    # One pipeline: its own metrics, readable, chosen apart from the all-pipelines choice.
    page.goto("/?pipeline=ui-wide")
    expect(page.locator(f'tr[data-run="{first}"] td[data-col="metric:samples"]')).to_be_visible()
    row = page.locator(f'tr[data-run="{first}"]')
    expect(row.locator('td[data-col="metric:learning_rate"]')).to_have_text("1.2e-05")
    expect(row.locator('td[data-col="metric:accuracy"]')).to_have_text("0.8734")
    # Run, pipeline, state, experiment, created, duration, executor; the metrics.
    assert len([h for h in shown_headings(page) if h]) == 7 + 26
    assert widths(page)["doc"] <= widths(page)["view"]


def test_promote_a_model_from_the_models_page(page: Any, headwater_home: Cli) -> None:
    import headwater

    store = f"sqlite:///{headwater_home.home / 'metadata.db'}"
    for i, accuracy in enumerate((0.8734, 0.91, 0.9), start=1):
        metrics = {"accuracy": accuracy, "samples": 99510.0}
        headwater.register_model("digits", f"/models/d{i}", metrics=metrics, metadata=store)
    headwater.promote_model("digits", 1, "production", metadata=store)
    page.goto("/models?name=digits")
    section = page.locator('section.model[data-model="digits"]')
    expect(section.locator("h2 small")).to_have_text("production: v1")
    row = section.locator('tr[data-version="2"]')
    expect(row.locator("td.metric").last).to_have_text("99,510")
    row.get_by_role("button", name="Promote").click()
    expect(section.locator("h2 small")).to_have_text("production: v2")
    expect(row.locator("span.stage")).to_have_text("production")
    expect(section.locator('tr[data-version="1"] span.stage')).to_have_text("none")
    # Change a stage with the menu; a refused change says why in the row.
    other = section.locator('tr[data-version="3"]')
    other.locator("select").select_option("staging")
    other.get_by_role("button", name="Set").click()
    expect(section.locator('tr[data-version="3"] span.stage')).to_have_text("staging")
    screenshot(page, "models-page")
    assert headwater.get_model("digits", 2, metadata=store).stage == "production"
    headwater.promote_model("digits", 3, "none", metadata=store)
    page.evaluate(
        "() => { const o = document.createElement('option'); o.textContent = 'gold';"
        " document.querySelector('tr[data-version=\"1\"] select').append(o); }"
    )
    first = section.locator('tr[data-version="1"]')
    first.locator("select").select_option("gold")
    first.get_by_role("button", name="Set").click()
    expect(first.locator(".stage-error")).to_contain_text("model stage 'gold' does not exist")


def test_start_a_run_shows_an_integer_default_as_declared(page: Any) -> None:
    page.goto(f"/runs/new?path={pipeline('ui_roc')}")
    expect(page.locator("#p-count")).to_have_value("20")  # `count: int = 20`, not 20.0
    expect(page.locator("#p-shift")).to_have_value("0.1")
