"""Start a run: the typed form, `POST /api/v1/pipelines` and `POST /api/v1/runs` with a real
pipeline run in this process."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_harness import ENV, call

import headwater

TYPED = str(Path(__file__).parent / "pipelines" / "typed_params.py")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    yield tmp_path / "home"


def finished(run_id: str, within: float = 60.0) -> headwater.RunDetails:
    deadline = time.monotonic() + within
    while True:
        run = headwater.get_run(run_id)
        if run.state != "RUNNING" or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


def test_the_form_is_typed_from_the_pipeline_parameters(home: Path) -> None:
    body = call("POST", "/api/v1/pipelines", json={"path": TYPED}).json()
    assert body["pipeline"] == "typed-params"
    fields = {p["name"]: (p["kind"], p["required"], p["default"]) for p in body["parameters"]}
    assert fields == {
        "n": ("int", True, None),
        "rate": ("float", False, 0.5),
        "flag": ("bool", False, True),
        "name": ("str", False, "hello"),
        "items": ("list", False, [1, 2]),
        "options": ("dict", False, {"a": 1}),
        "rounds": ("int", False, 100),
        "scale": ("float", False, 2.0),
    }
    # The IR keeps every number as a double; defaults are shown as the pipeline declares them.
    assert isinstance(fields["rounds"][2], int) and isinstance(fields["scale"][2], float)
    page = call("GET", f"/runs/new?path={TYPED}").text
    assert 'data-kind="int"' in page and 'step="1"' in page and "required" in page
    assert 'data-kind="bool"' in page and " checked" in page
    assert re.search(r'id="p-rounds"[^>]*value="100"', page, re.S), page
    assert re.search(r'id="p-scale"[^>]*value="2.0"', page, re.S)
    assert re.search(r'id="p-name"[^>]*value="hello"', page, re.S)
    assert "[1, 2]</textarea>" in page and '{"a": 1}</textarea>' in page
    assert "/static/launch.js" in page
    # Its button waits for launch.js: a click before the script would GET the form's fields.
    assert '<button id="launch" disabled>' in page


def test_start_a_run_and_land_on_its_page(home: Path) -> None:
    params = {"n": 3, "rate": 0.25, "flag": False, "items": ["x"], "options": {"b": 2}}
    response = call("POST", "/api/v1/runs", json={"path": TYPED, "parameters": params})
    assert response.status_code == 200, response.text
    run_id = response.json()["run_id"]
    assert response.json()["url"] == f"/runs/{run_id}"
    assert call("GET", f"/runs/{run_id}").status_code == 200  # visible at once
    run = finished(run_id)
    assert run.state == "SUCCEEDED"
    assert run.parameters == {**params, "name": "hello", "rounds": 100, "scale": 2.0}
    assert run.tasks[0].outputs["Output"] == "3 0.25 False hello ['x'] {'b': 2}"


def test_an_uploaded_ir_is_saved_and_runs(home: Path, tmp_path: Path) -> None:
    ir = tmp_path / "typed.yaml"
    headwater.compile(TYPED, ir)
    upload = {"content": ir.read_text(), "filename": "typed.yaml"}
    saved = call("POST", "/api/v1/pipelines", json=upload).json()
    assert Path(saved["path"]).parent == home / "ui-uploads"
    assert "n" in {p["name"] for p in saved["parameters"]}
    response = call("POST", "/api/v1/runs", json={**upload, "parameters": {"n": 1}})
    assert response.status_code == 200, response.text
    assert finished(response.json()["run_id"]).state == "SUCCEEDED"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"path": "/no/such/pipeline.py"}, "pipeline file not found"),
        ({"path": TYPED, "parameters": {}}, "missing required parameter 'n'"),
        ({"path": TYPED, "parameters": {"n": 1, "bogus": 2}}, "unknown parameter 'bogus'"),
        ({"path": TYPED, "parameters": {"n": "three"}}, "expects int"),
        ({"content": "x", "filename": "p.txt"}, "expected one of .py"),
        ({"path": TYPED, "content": "x"}, "either 'path' or 'content'"),
        ({}, "either 'path' or 'content'"),
    ],
    ids=["missing-file", "missing-param", "unknown-param", "mistyped", "suffix", "both", "none"],
)
def test_bad_pipeline_or_parameter_is_a_one_line_400(
    home: Path, body: dict[str, object], message: str
) -> None:
    response = call("POST", "/api/v1/runs", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert message in error and "\n" not in error
    assert headwater.list_runs() == []


def test_a_form_post_is_not_json_and_is_refused(home: Path) -> None:
    response = call("POST", "/api/v1/runs", headers={"content-type": "text/plain"})
    assert response.status_code == 400


def test_starting_needs_the_token(home: Path) -> None:
    body = {"path": TYPED, "parameters": {"n": 1}}
    assert call("POST", "/api/v1/runs", token="s3cret", json=body).status_code == 401
    assert call("GET", f"/runs/new?path={TYPED}", token="s3cret").status_code == 401
    assert headwater.list_runs() == []


def test_the_page_shows_a_load_error(home: Path) -> None:
    page = call("GET", "/runs/new?path=/no/such.py")
    assert page.status_code == 200
    assert "pipeline file not found" in page.text and "launch-form" not in page.text
