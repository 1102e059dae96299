"""`headwater server`'s UI in a real headless Chromium: the links `kfp.Client` prints open the
experiment, pipeline, version, run and recurring-run pages; the runs table shows run names and
filters by experiment; a run started from a version's page is queued and run; a version's
graph opens no task panel over its parameters.

Real parts only: a `headwater server` subprocess, the stock `kfp.Client` making the records,
Debian's `chromium` driven by Playwright.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_ui_browser
import yaml
from kfp import compiler
from server_harness import adder, kfp_client, running_server
from test_ui_browser import expect, screenshot

pytestmark = [pytest.mark.integration]

UI_LOOPS = Path(__file__).parents[1] / "unit" / "ui" / "pipelines" / "ui_loops.py"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A server with an experiment of two named runs, a pipeline of two versions and a
    recurring run of the second, made through kfp.Client."""
    root = tmp_path_factory.mktemp("ui-server")
    package = root / "adder.yaml"
    compiler.Compiler().compile(adder, str(package))
    with running_server(root / "home") as base:
        client = kfp_client(base)
        runs = [
            client.create_run_from_pipeline_func(
                adder, arguments={"x": i}, run_name=f"named run {i}", experiment_name="team-a"
            ).run_id
            for i in (1, 2)
        ]
        other = client.create_run_from_pipeline_func(adder, run_name="elsewhere").run_id
        for run_id in (*runs, other):
            client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
        experiment = client.get_experiment(experiment_name="team-a")
        pipeline = client.upload_pipeline(str(package), pipeline_name="adder-uploaded")
        v2 = client.upload_pipeline_version(
            str(package), pipeline_version_name="v2", pipeline_id=pipeline.pipeline_id
        )
        recurring = client.create_recurring_run(
            experiment_id=experiment.experiment_id,
            job_name="nightly",
            cron_expression="0 0 3 * * *",
            pipeline_id=pipeline.pipeline_id,
            version_id=v2.pipeline_version_id,
            params={"x": 9},
        )
        yield {
            "base": base,
            "client": client,
            "runs": runs,
            "experiment": experiment.experiment_id,
            "pipeline": pipeline.pipeline_id,
            "version": v2.pipeline_version_id,
            "recurring": recurring.recurring_run_id,
        }


# The browser and its page, as the standalone UI's tests make them (over `base_url`).
browser = test_ui_browser.browser
page = test_ui_browser.page


@pytest.fixture(scope="module")
def base_url(records: dict[str, Any]) -> str:
    """Where `page` (test_ui_browser's) opens its pages: the server's UI."""
    return str(records["base"])


def test_the_links_kfp_client_prints_open_their_pages(page: Any, records: dict[str, Any]) -> None:
    page.goto(f"/#/experiments/details/{records['experiment']}")
    expect(page).to_have_url(re.compile(f"/experiments/{records['experiment']}$"))
    expect(page.locator("h1")).to_contain_text("Experiment team-a")
    table = page.locator("table.runs").first
    for name in ("named run 1", "named run 2"):
        expect(table).to_contain_text(name)
    expect(table).not_to_contain_text("elsewhere")
    expect(page.locator("#recurring-runs")).to_contain_text("nightly")

    page.goto(f"/#/runs/details/{records['runs'][0]}")
    expect(page).to_have_url(re.compile(f"/runs/{records['runs'][0]}$"))
    expect(page.locator("h1")).to_contain_text("named run 1")
    expect(page.locator("#run-experiment")).to_have_text("team-a")

    page.goto(f"/#/pipelines/details/{records['pipeline']}")
    expect(page).to_have_url(re.compile(f"/pipelines/{records['pipeline']}$"))
    expect(page.locator("#versions tbody tr")).to_have_count(2)

    page.goto(f"/#/pipelines/details/{records['pipeline']}/version/{records['version']}")
    expect(page).to_have_url(re.compile(f"/versions/{records['version']}$"))
    # The version's graph, drawn from its spec before any run: both tasks, still to run.
    nodes = page.locator("svg#dag g.node")
    expect(nodes).to_have_count(2)
    expect(nodes.first).to_have_class(re.compile(r"\bPENDING\b"))
    expect(page.locator("svg#dag polyline.edge")).to_have_count(1)
    screenshot(page, "pipeline-version")

    page.goto(f"/#/recurringrun/details/{records['recurring']}")
    expect(page).to_have_url(re.compile(f"/recurring-runs/{records['recurring']}$"))
    facts = page.locator("#recurring-facts")
    expect(facts).to_contain_text("cron 0 0 3 * * *")
    expect(facts).to_contain_text("ENABLED")
    screenshot(page, "recurring-run")
    page.locator("button.toggle-recurring").click()
    expect(facts).to_contain_text("DISABLED")
    client = records["client"]
    assert client.get_recurring_run(records["recurring"]).status == "DISABLED"
    page.locator("button.toggle-recurring").click()
    expect(facts).to_contain_text("ENABLED")


def test_experiments_list_counts_runs_and_archives(page: Any, records: dict[str, Any]) -> None:
    page.goto("/experiments")
    row = page.locator(f'tr[data-experiment="{records["experiment"]}"]')
    expect(row).to_contain_text("team-a")
    expect(row.locator("td").nth(1)).to_have_text("2")
    expect(row).to_contain_text("SUCCEEDED")
    screenshot(page, "experiments")
    row.locator("button.archive").click()
    expect(row).to_contain_text("archived")
    client = records["client"]
    assert client.get_experiment(records["experiment"]).storage_state == "ARCHIVED"
    assert client.get_run(records["runs"][0]).storage_state == "ARCHIVED"
    row.locator("button.archive").click()
    expect(row).not_to_contain_text("archived")


def test_the_runs_table_names_runs_and_filters_by_experiment(
    page: Any, records: dict[str, Any]
) -> None:
    page.goto("/")
    table = page.locator("table.runs")
    expect(table).to_contain_text("elsewhere")
    expect(table.locator('td[data-col="experiment"]').first).not_to_be_empty()
    page.select_option('select[name="experiment"]', records["experiment"])
    page.locator("form.filters button").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    expect(page.locator("table.runs")).not_to_contain_text("elsewhere")


def test_a_run_started_from_a_version_page_is_queued_and_runs(
    page: Any, records: dict[str, Any]
) -> None:
    page.goto(f"/pipelines/{records['pipeline']}/versions/{records['version']}")
    # The form's page loaded, its script with it: a click before that submits it as a plain
    # GET (seen once on a loaded machine).
    with page.expect_navigation(wait_until="load"):
        page.locator("#start-version").click()
    expect(page.locator("#launch-form")).to_be_visible()
    page.fill("#run-name", "from the version page")
    page.select_option("#run-experiment", records["experiment"])
    page.fill("#p-x", "41")
    page.locator("#launch").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]+$"))
    expect(page.locator("#run-state")).to_have_text("SUCCEEDED", timeout=60_000)
    run_id = page.url.rsplit("/", 1)[-1]
    run = records["client"].get_run(run_id)
    assert (run.display_name, run.experiment_id, run.state) == (
        "from the version page",
        records["experiment"],
        "SUCCEEDED",
    )
    assert run.pipeline_version_reference.pipeline_version_id == records["version"]
    assert run.runtime_config.parameters["x"] == 41


@pytest.fixture(scope="module")
def loops_version(records: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The page of ui_loops uploaded as a pipeline: a loop of 12 iterations over a literal
    list, so its graph draws 5 of them and a "+7 more iterations" node."""
    from headwater.spec.loader import load_pipeline

    package = tmp_path_factory.mktemp("loops") / "ui_loops.yaml"
    package.write_text(yaml.safe_dump(load_pipeline(str(UI_LOOPS)).raw))
    client = records["client"]
    pipeline = client.upload_pipeline(str(package), pipeline_name="loops-uploaded")
    [version] = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    return f"/pipelines/{pipeline.pipeline_id}/versions/{version.pipeline_version_id}"


def test_a_version_graph_leaves_its_parameters_in_the_panel(page: Any, loops_version: str) -> None:
    page.goto(loops_version)
    expect(page.locator('svg#dag[data-ready="true"]')).to_have_count(1)
    panel = page.locator("#task-panel")
    expect(panel.locator("h2")).to_have_text("Parameters")
    # No run, so no iterations' tasks to list: the "+K more" node opens nothing.
    more = page.locator('svg#dag g.node.more[data-task="for-loop-2:more"]')
    expect(more.locator("text").first).to_have_text("+7 more iterations")
    more.click()
    page.locator('svg#dag g.node[data-task="square[0]"]').click()
    expect(panel.locator("h2")).to_have_text("Parameters")
    expect(panel).to_contain_text("fail_on")
    expect(panel.locator("table.folded")).to_have_count(0)


def test_pages_answer_unknown_ids_with_404(page: Any) -> None:
    for path in ("/experiments/nope", "/pipelines/nope", "/recurring-runs/nope"):
        answer = page.goto(path)
        assert answer is not None and answer.status == 404, path


SHOTS = Path(__file__).parent  # (screenshots go where HEADWATER_UI_SCREENSHOTS says)
