"""The Models page and `GET /api/v1/models`: the registry's versions, stages and metrics."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ui_harness import ENV, call

import headwater


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


@pytest.fixture
def registry(home: Path) -> Path:
    headwater.register_model("churn", "/models/c1", framework="xgboost", metrics={"auc": 0.8})
    headwater.register_model("churn", "/models/c2", framework="xgboost", metrics={"auc": 0.85})
    headwater.register_model("churn", "/models/c3", metrics={"auc": 0.9, "loss": 0.1})
    headwater.promote_model("churn", 2, "production")
    headwater.promote_model("churn", 3, "staging")
    headwater.register_model("<b>odd</b>", "/models/o1")
    return home


def test_the_api_groups_versions_by_model(registry: Path) -> None:
    body = call("GET", "/api/v1/models").json()
    assert [m["name"] for m in body["models"]] == ["<b>odd</b>", "churn"]
    churn = body["models"][1]
    assert churn["production"] == 2 and churn["metrics"] == ["auc", "loss"]
    shown = [(v["version"], v["stage"], v["metrics"].get("auc")) for v in churn["versions"]]
    assert shown == [(3, "staging", 0.9), (2, "production", 0.85), (1, "none", 0.8)]
    assert body["models"][0]["production"] is None


def test_the_page_shows_stages_and_metrics_escaped(registry: Path) -> None:
    page = call("GET", "/models")
    assert page.status_code == 200
    assert 'data-model="churn"' in page.text and "production: v2" in page.text
    assert '<span class="stage staging">staging</span>' in page.text
    assert "0.85" in page.text and "xgboost" in page.text
    assert "<b>odd</b>" not in page.text and "&lt;b&gt;odd&lt;/b&gt;" in page.text


def test_filter_by_name(registry: Path) -> None:
    body = call("GET", "/api/v1/models?name=churn").json()
    assert [m["name"] for m in body["models"]] == ["churn"]
    missing = call("GET", "/api/v1/models?name=nope")
    assert missing.status_code == 404 and "churn" in missing.json()["error"]


def test_an_empty_registry(home: Path) -> None:
    assert call("GET", "/api/v1/models").json() == {"models": [], "endpoints": []}
    assert "No models are registered" in call("GET", "/models").text


def test_models_need_the_token(registry: Path) -> None:
    assert call("GET", "/api/v1/models", token="s3cret").status_code == 401
    ok = call("GET", "/api/v1/models", token="s3cret", headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200


@pytest.fixture
def endpoints(registry: Path) -> dict[str, int]:
    """Two recorded endpoints of churn v2: this test process standing in as a live server
    (the state check reads its pid and start time), and one whose process has ended."""
    import os
    import socket
    import subprocess
    import sys

    from headwater import config
    from headwater.metadata import open_store
    from headwater.metadata.base import EndpointRecord
    from headwater.processes import process_start

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    model = {"name": "churn", "version": "2", "registered": "churn:2", "uri": "/models/c2"}
    store = open_store(config.metadata_url())
    try:
        here = socket.gethostname()
        live = EndpointRecord("churn-live", "http://127.0.0.1:9001", here, os.getpid(),
                              process_start(os.getpid()), models=[model])  # fmt: skip
        old_model = {**model, "version": "1", "registered": "churn:1"}
        old = EndpointRecord("churn-old", "http://127.0.0.1:9002", here, int(ended.stdout),
                             "1", models=[old_model])  # fmt: skip
        store.save_endpoint(live)
        store.save_endpoint(old)
    finally:
        store.close()
    return {"live": os.getpid()}


def test_endpoints_are_listed_with_their_state_and_marked_on_their_version(
    endpoints: dict[str, int],
) -> None:
    body = call("GET", "/api/v1/endpoints").json()
    shown = [(e["name"], e["state"], e["models"][0]["model"], e["models"][0]["version"])
             for e in body["endpoints"]]  # fmt: skip
    assert shown == [("churn-live", "running", "churn", "2"), ("churn-old", "exited", "churn", "1")]
    churn = call("GET", "/api/v1/models?name=churn").json()
    assert [e["name"] for e in churn["endpoints"]] == ["churn-live", "churn-old"]
    by_version = {v["version"]: v["endpoints"] for v in churn["models"][0]["versions"]}
    assert by_version == {3: [], 2: ["churn-live"], 1: []}  # an exited server serves nothing
    odd = call("GET", "/api/v1/models?name=%3Cb%3Eodd%3C%2Fb%3E").json()
    assert odd["endpoints"] == []
    page = call("GET", "/models").text
    assert 'data-endpoint="churn-live"' in page and '<span class="state running">' in page
    assert '<span class="state exited">exited</span>' in page
    assert "serving: churn-live" in page
    assert 'href="http://127.0.0.1:9001/v2/models/churn-live"' in page


def test_promote_from_the_api_demotes_the_production_version(registry: Path) -> None:
    done = call("POST", "/api/v1/models/churn/versions/1/stage", json={"stage": "Production"})
    assert done.status_code == 200, done.text
    assert done.json()["model"]["stage"] == "production"
    assert [(m["version"], m["stage"]) for m in done.json()["demoted"]] == [(2, "none")]
    assert headwater.get_model("churn", 1).stage == "production"
    back = call("POST", "/api/v1/models/churn/versions/1/stage", json={"stage": "staging"})
    assert back.json() == {**back.json(), "demoted": []}
    assert headwater.get_model("churn", 1).stage == "staging"
    # A name with a slash in it (sent encoded) is one name.
    headwater.register_model("team/churn", "/models/t1")
    slash = call("POST", "/api/v1/models/team%2Fchurn/versions/1/stage", json={"stage": "staging"})
    assert slash.status_code == 200 and headwater.get_model("team/churn", 1).stage == "staging"


#: Bad stage changes: (path after /models/, body, status, the error's start).
BAD_CHANGES = [
    ("churn/versions/1", {"stage": "prod"}, 400, "model stage 'prod' does not exist (stages:"),
    ("churn/versions/1", {}, 400, "bad request: body.stage: Field required"),
    ("churn/versions/1", {"stage": 3}, 400, "bad request: body.stage"),
    ("churn/versions/one", {"stage": "none"}, 400, "bad request: path.version"),
    ("churn/versions/0", {"stage": "none"}, 400, "model version must be"),
    ("churn/versions/9", {"stage": "none"}, 404, "model 'churn' has no version 9 (registered"),
    ("nope/versions/1", {"stage": "none"}, 404, "no model named 'nope'"),
]


def test_a_bad_stage_change_is_one_line_and_changes_nothing(registry: Path) -> None:
    # One registry for every case: each setup migrates a new SQLite store (seconds on CI).
    for path, body, code, message in BAD_CHANGES:
        answer = call("POST", f"/api/v1/models/{path}/stage", json=body)
        assert answer.status_code == code, (path, body, answer.text)
        error = answer.json()["error"]
        assert error.startswith(message), (path, body, error)
        assert "\n" not in error
    stages = [(m.version, m.stage) for m in headwater.list_models(name="churn")]
    assert stages == [(3, "staging"), (2, "production"), (1, "none")]


def test_a_stage_change_follows_the_token_and_browser_rules(registry: Path) -> None:
    url = "/api/v1/models/churn/versions/1/stage"
    body = '{"stage": "production"}'
    json_type = {"Content-Type": "application/json"}
    refused = [
        call("POST", url, content=body, headers=json_type, token="s3cret").status_code,
        call("POST", url, content=body, headers={"Content-Type": "text/plain"}).status_code,
        call(
            "POST", url, content=body, headers={**json_type, "Origin": "http://evil.example"}
        ).status_code,
        call("POST", url, content=body, headers={**json_type, "Host": "evil.example"}).status_code,
    ]
    assert refused == [401, 415, 403, 403]
    assert headwater.get_model("churn", 1).stage == "none"
    own = {**json_type, "Origin": "http://127.0.0.1:8080", "Cookie": "headwater_token=s3cret"}
    ok = call("POST", url, content=body, headers=own, token="s3cret")
    assert ok.status_code == 200, ok.text
    assert headwater.get_model("churn", 1).stage == "production"


def test_the_page_has_stage_controls_posted_by_models_js(registry: Path) -> None:
    page = call("GET", "/models").text
    assert '<script src="/static/models.js" defer></script>' in page
    forms = re.findall(r'<form class="stage-form" data-model="([^"]*)" data-version="(\d+)"', page)
    assert ("churn", "1") in forms and ("&lt;b&gt;odd&lt;/b&gt;", "1") in forms
    assert page.count('class="promote"') == 3  # every version not in production
    assert "<option selected>production</option>" in page
    script = call("GET", "/static/models.js").text
    assert '"Content-Type": "application/json"' in script and "/stage" in script
