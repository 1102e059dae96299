"""Every artifact kind KFP defines, and the folders our components write, on the Artifact page.

One real run of `pipelines/ui_kinds.py` (module-scoped), then each artifact page through the
real app: it must answer 200 with its preview, or a plain reason when there is none.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_harness import ENV, call

import headwater

PIPELINE = str(Path(__file__).parent / "pipelines" / "ui_kinds.py")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`task/output` -> the artifact page's path, for the one run of the pipeline."""
    home = tmp_path_factory.mktemp("kinds") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HEADWATER_HOME", str(home))
        for name in ENV:
            mp.delenv(name, raising=False)
        run = headwater.run(PIPELINE)
        assert run.state == "SUCCEEDED"
        pages = {}
        for task in headwater.get_run(run.run_id).tasks:
            for slot, uris in task.output_artifacts.items():
                pages[f"{task.name}/{slot}"] = f"/artifacts/{headwater.get_artifact(uris[0]).id}"
        pages["run_id"] = run.run_id
        yield pages


def _page(outputs: dict[str, str], key: str) -> str:
    page = call("GET", outputs[key])
    assert page.status_code == 200, page.text[-2000:]
    return page.text


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("metrics-kinds/scalars", ["<th>accuracy</th><td>0.875</td>"]),
        ("metrics-kinds/digits", ['class="confusion"', ">zero<", ">two<", "No ROC curve"]),
        ("metrics-kinds/binary", ['class="confusion"', 'class="roc-curve"']),
        ("metrics-kinds/sliced", ["Slice <code>north</code>", 'class="confusion"', "roc-curve"]),
        (
            "metrics-kinds/page",
            ['<iframe class="html-artifact"', "kinds report", "data:image/png;base64,", "end of"],
        ),
        ("metrics-kinds/notes", ["<h1>Kinds notes</h1>"]),
    ],
    ids=["metrics", "confusion-3-class-no-roc", "confusion-and-roc", "sliced", "html", "markdown"],
)
def test_metrics_and_documents_render(
    outputs: dict[str, str], key: str, expected: list[str]
) -> None:
    text = _page(outputs, key)
    for snippet in expected:
        assert snippet in text


def test_a_parquet_folder_shows_schema_row_count_and_rows_across_parts(
    outputs: dict[str, str],
) -> None:
    text = _page(outputs, "folder-kinds/parquet")
    assert "parquet, 2 files, 60 rows" in text
    assert "<th>x<br><small>int64</small></th>" in text
    cells = re.findall(r"<tr><td>(\d+)</td><td>L\d+</td></tr>", text)
    assert cells == [str(i) for i in range(20)]
    assert "part.0.parquet" in text and "part.1.parquet" in text


def test_a_csv_folder_shows_rows_of_every_part_under_one_header(outputs: dict[str, str]) -> None:
    text = _page(outputs, "folder-kinds/csv")
    assert "csv, 2 files, 6 rows" in text
    rows = re.findall(r"<tr><td>(\d+)</td><td>\d+</td></tr>", text)
    assert rows == ["00", "01", "02", "10", "11", "12"]


def test_a_model_folder_lists_its_files_and_metadata_as_a_table(outputs: dict[str, str]) -> None:
    text = _page(outputs, "folder-kinds/model")
    assert re.search(r"<td><code>model.json</code></td><td>\d+ bytes</td>", text)
    assert "<code>requirements.txt</code>" in text
    assert '<table class="kv metadata">' in text
    assert "<th>framework</th><td>xgboost</td>" in text
    assert "<th>rounds</th><td>12</td>" in text
    assert '"framework": "xgboost"' not in text  # not the raw JSON


def test_tensorboard_logs_say_how_to_open_them(outputs: dict[str, str]) -> None:
    text = _page(outputs, "folder-kinds/tensorboard")
    assert f"headwater tensorboard {outputs['run_id'][:8]}" in text
    assert "No preview" not in text
