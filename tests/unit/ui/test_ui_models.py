"""The Models page and `GET /api/v1/models`: the registry's versions, stages and metrics."""

from __future__ import annotations

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
