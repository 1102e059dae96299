"""The experiments, pipelines and recurring-run pages, on catalog records written to the store
the `store` fixture's runs went to: their pagers keep the page size, and a recurring run
whose runtime config names no parameters renders."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from ui_harness import Store, call

from headwater.metadata import open_store
from headwater.metadata.base import (
    ExperimentRecord,
    PipelineRecord,
    RecurringRunRecord,
    RunRecord,
    VersionRecord,
)

CRON = {"cron_schedule": {"cron": "0 0 3 * * *"}}


@pytest.fixture(scope="module")
def catalog(store: Store) -> Iterator[dict[str, str]]:
    """Two of each: experiments, pipelines (a version each, the demo pipeline's IR) and
    recurring runs (the first with `parameters`, the second without, as a runtime config may
    be), and two runs that the first recurring run made in the first experiment."""
    md = open_store()
    try:
        made_by = md.get_run(store.ok)
        assert made_by is not None
        demo = md.get_version(made_by.pipeline_version_id)
        assert demo is not None
        experiments = [
            md.create_experiment(ExperimentRecord(f"exp-{i}", f"team {i}", created_at=10.0 + i))
            for i in range(2)
        ]
        for i in range(2):
            md.create_pipeline(
                PipelineRecord(f"pipe-{i}", f"demo {i}", created_at=10.0 + i),
                VersionRecord(
                    f"ver-{i}", f"pipe-{i}", demo.name, demo.digest, display_name=f"v{i}",
                    ir=demo.ir, created_at=10.0 + i,
                ),
            )  # fmt: skip
        configs = [{"parameters": {"rows": 2}}, {"pipeline_root": ""}]
        for i, config in enumerate(configs):
            md.create_recurring_run(
                RecurringRunRecord(
                    f"rec-{i}", f"nightly {i}", "ver-0", CRON, runtime_config=config,
                    experiment_id="exp-0", created_at=10.0 + i, updated_at=10.0 + i,
                )
            )  # fmt: skip
        for i in range(2):
            md.create_run(
                RunRecord(
                    f"fired-{i}", demo.name, demo.digest, "SUCCEEDED", created_at=20.0 + i,
                    finished_at=21.0 + i, pipeline_version_id="ver-0", experiment_id="exp-0",
                    recurring_run_id="rec-0",
                ),
                ir=demo.ir,
            )  # fmt: skip
    finally:
        md.close()
    yield {"experiment": experiments[0].experiment_id, "recurring": "rec-0", "bare": "rec-1"}


def _link(page: str, rel: str) -> dict[str, list[str]]:
    """The query of the page's `rel` ("next" or "prev") pager link."""
    found = re.search(rf'<a rel="{rel}" href="([^"]+)"', page)
    assert found, f"no {rel} link"
    return parse_qs(urlsplit(html.unescape(found[1])).query)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/experiments",
        "/pipelines",
        "/recurring-runs",
        "/experiments/{experiment}",
        "/recurring-runs/{recurring}",
    ],
    ids=["runs", "experiments", "pipelines", "recurring-runs", "experiment", "recurring-run"],
)
def test_pager_links_keep_the_page_size(catalog: dict[str, str], path: str) -> None:
    url = path.format(**catalog)
    first = call("GET", f"{url}?limit=1")
    assert first.status_code == 200, first.text
    older = _link(first.text, "next")
    assert (older["limit"], older["offset"]) == (["1"], ["1"])
    second = call("GET", f"{url}?limit=1&offset=1")
    newer = _link(second.text, "prev")
    assert (newer["limit"], newer["offset"]) == (["1"], ["0"])


def test_recurring_run_without_parameters_renders(catalog: dict[str, str]) -> None:
    page = call("GET", f"/recurring-runs/{catalog['bare']}")
    assert page.status_code == 200, page.text
    assert "<tr><th>Parameters</th><td><code>{}</code></td></tr>" in page.text
    named = call("GET", f"/recurring-runs/{catalog['recurring']}").text
    assert '<code>{"rows": 2}</code>' in named
