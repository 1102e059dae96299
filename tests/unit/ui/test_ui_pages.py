"""The HTML pages, the static files and the token, on a store filled by real runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ui_harness import Store, call

import headwater
from headwater.ui.markdown import sanitise_html
from headwater.ui.previews import PathOutsideStoreError, confined_path


def test_runs_page_lists_runs_with_metric_columns_and_pages(store: Store) -> None:
    page = call("GET", "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text.count('<tr data-run="') == 3
    assert '<th class="metric" data-col="metric:accuracy">accuracy</th>' in page.text
    assert f'href="/runs/{store.failed}"' in page.text and 'class="delete"' in page.text
    first = call("GET", "/?limit=2")
    assert first.text.count('<tr data-run="') == 2 and "offset=2" in first.text
    failed = call("GET", "/?state=FAILED")
    assert failed.text.count('<tr data-run="') == 1 and store.failed in failed.text


def test_runs_page_of_an_unknown_experiment_is_a_404_that_names_it(store: Store) -> None:
    # As an unknown run's or experiment's page: the page would be headed by the experiment.
    page = call("GET", "/?experiment=nope&limit=2")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert (
        "no experiment with id &#39;nope&#39;: pick one under Experiments, or list every run "
        "under Runs" in page.text
    )
    # The API's list filters, as KFP's does: no runs.
    listed = call("GET", "/api/v1/runs?experiment=nope")
    assert listed.status_code == 200 and listed.json()["runs"] == []


def test_run_page_draws_the_graph_coloured_by_state(store: Store) -> None:
    page = call("GET", f"/runs/{store.failed}")
    assert page.status_code == 200
    found = re.findall(r'<g class="node (\w+)" data-task="([\w-]+)"', page.text)
    assert {task: state for state, task in found} == {
        "make-data": "CACHED",
        "evaluate": "CACHED",
        "fail": "FAILED",
    }
    assert page.text.count('<line class="edge"') == 2
    assert "boom on purpose" in page.text
    assert '<script src="/static/app.js"' in page.text


def test_artifact_page_plots_classification_metrics(store: Store) -> None:
    [evaluate] = [t for t in headwater.get_run(store.ok).tasks if t.name == "evaluate"]
    uri = evaluate.output_artifacts["classification"][0]
    page = call("GET", f"/artifacts/{headwater.get_artifact(uri).id}")
    assert page.status_code == 200
    assert 'class="confusion"' in page.text and 'class="roc-curve"' in page.text
    assert '<svg id="lineage"' in page.text and f'<a href="/runs/{store.ok}">' in page.text
    assert re.search(r'<g class="node artifact selected" data-id="a:\d+"', page.text)
    assert 'data-id="e:' in page.text  # the task that wrote it


def test_artifact_page_sandboxes_html_and_sanitises_markdown(store: Store) -> None:
    [evaluate] = [t for t in headwater.get_run(store.ok).tasks if t.name == "evaluate"]
    html = call("GET", f"/artifacts/{evaluate.output_artifacts['page'][0]}").text
    assert '<iframe class="html-artifact" sandbox=""' in html
    assert "<script>parent.alert" not in html  # escaped into srcdoc, run only sandboxed
    notes = call("GET", f"/artifacts/{evaluate.output_artifacts['notes'][0]}").text
    assert "<h1>Notes</h1>" in notes and "alert(" not in notes


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ("<p onclick='x()'>hi</p>", "<p>hi</p>"),
        ("<script>alert(1)</script>ok", "ok"),
        ('<a href="javascript:alert(1)">x</a>', '<a rel="noopener noreferrer nofollow">x</a>'),
        ('<a href=" JaVaScRiPt:alert(1)">x</a>', '<a rel="noopener noreferrer nofollow">x</a>'),
        ("<img src=x onerror=alert(1)>", '<img src="x">'),
        ("<iframe src=//evil></iframe><b>b</b>", "<b>b</b>"),
        ("&lt;script&gt;", "&lt;script&gt;"),
    ],
    ids=["attr", "script", "js-link", "js-link-spaced", "onerror", "iframe", "entities"],
)
def test_sanitiser(dirty: str, clean: str) -> None:
    assert sanitise_html(dirty) == clean


def test_paths_are_confined_to_the_store(tmp_path: Path) -> None:
    root = tmp_path / "artifacts"
    (root / "p").mkdir(parents=True)
    (root / "p" / "ok").write_text("x")
    assert confined_path(str(root / "p" / "ok"), [str(root)]) == (root / "p" / "ok").resolve()
    assert confined_path("s3://bucket/key", [str(root)]) is None
    for escape in [str(root / ".." / "elsewhere"), "/etc/passwd", f"file://{root}/../x"]:
        with pytest.raises(PathOutsideStoreError):
            confined_path(escape, [str(root)])


def test_compare_page_highlights_differences(store: Store) -> None:
    page = call("GET", f"/compare?runs={store.first},{store.ok}")
    assert page.status_code == 200
    assert '<tr class="differs"><th>rows</th>' in page.text
    assert '<tr class="same"><th>broken</th>' in page.text
    assert page.text.count('class="roc-curve"') == 2  # one per run, overlaid


def test_unknown_pages_are_html_errors(store: Store) -> None:
    page = call("GET", "/runs/nope<script>")
    assert page.status_code == 404 and "<script>" not in page.text


def test_static_files_are_served_from_the_package(store: Store) -> None:
    assert "setupRun" in call("GET", "/static/app.js").text
    assert call("GET", "/static/style.css").status_code == 200


@pytest.mark.parametrize("path", ["/", "/api/v1/runs", "/static/app.js", "/api/v1/openapi.json"])
def test_token_is_required_everywhere(store: Store, path: str) -> None:
    refused = call("GET", path, token="s3cret")
    assert refused.status_code == 401
    wrong = call("GET", path, token="s3cret", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = call("GET", path, token="s3cret", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_token_in_the_query_sets_a_cookie(store: Store) -> None:
    landed = call("GET", "/?state=FAILED&token=s3cret", token="s3cret")
    assert landed.status_code == 303 and landed.headers["location"] == "/?state=FAILED"
    cookie = landed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    page = call("GET", "/?state=FAILED", token="s3cret", cookies={"headwater_token": "s3cret"})
    assert page.status_code == 200 and store.failed in page.text
    bad = call("GET", "/?token=guess", token="s3cret")
    assert bad.status_code == 401 and "token" in bad.text


def test_model_artifact_shows_its_registry_entries(store: Store) -> None:
    pipelines = Path(__file__).parents[2] / "integration" / "pipelines"
    done = headwater.run(str(pipelines / "models_register.py"), {"seed": 3})
    assert done.state == "SUCCEEDED"
    [train] = [t for t in headwater.get_run(done.run_id).tasks if t.name == "train"]
    uri = train.output_artifacts["model"][0]
    body = call("GET", f"/api/v1/artifacts/{uri}").json()
    [entry] = body["registry"]
    assert (entry["name"], entry["stage"], entry["run_id"]) == ("toy", "production", done.run_id)
    page = call("GET", f"/artifacts/{uri}").text
    assert "<h2>Model registry</h2>" in page and "<td>toy</td>" in page


@pytest.mark.parametrize(
    "path", ["/", "/api/v1/runs", "/api/v1/runs/nope"], ids=["page", "api", "404"]
)
def test_security_headers_on_every_response(store: Store, path: str) -> None:
    headers = call("GET", path).headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_a_foreign_host_gets_an_error_page_or_json(store: Store) -> None:
    page = call("GET", "/", headers={"Host": "evil.example:8080"})
    api = call("GET", "/api/v1/runs", headers={"Host": "evil.example:8080"})
    assert page.status_code == 403 and "text/html" in page.headers["content-type"]
    assert "start it with --allow-host evil.example" in page.text
    assert store.ok not in page.text
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert api.status_code == 403
    assert api.json()["error"].startswith("Host 'evil.example:8080' is not a name of this server")
    named = call(
        "GET", "/api/v1/runs", headers={"Host": "ui.example"}, allowed_hosts=("ui.example",)
    )
    assert named.status_code == 200 and store.ok in named.text


def test_another_sites_changes_are_refused(store: Store) -> None:
    evil = {"Origin": "http://evil.example"}
    deleted = call("DELETE", f"/api/v1/runs/{store.first}", headers=evil)
    upload = '{"content": "x", "filename": "p.py"}'
    plain = call(
        "POST", "/api/v1/pipelines", content=upload, headers={"Content-Type": "text/plain"}
    )
    assert deleted.status_code == 403
    assert deleted.json()["error"].startswith(
        "cross-site request refused: DELETE from Origin 'http://evil.example', not this "
        "server's (http://127.0.0.1:8080)"
    )
    assert plain.status_code == 415
    assert plain.json()["error"].startswith("POST /api/v1/pipelines takes JSON only")
    assert call("GET", f"/api/v1/runs/{store.first}").status_code == 200  # not deleted
