"""The hooks a metrics exporter implements see every request and every prediction stage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from headwater.serving.app import create_app
from headwater.serving.observe import ServingHooks

from .helpers import client, rows, v2_input

pytestmark = pytest.mark.anyio


class Recorder(ServingHooks):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.stages: list[dict[str, Any]] = []

    def after_request(self, **seen: Any) -> None:
        self.requests.append(seen)

    def after_stage(self, **seen: Any) -> None:
        self.stages.append(seen)


class Broken(ServingHooks):
    def after_request(self, **seen: Any) -> None:
        raise RuntimeError("a broken exporter")


async def test_hooks_see_requests_and_stages(xgboost_model: Callable[..., str]) -> None:
    recorder = Recorder()
    app = create_app([xgboost_model()], hooks=[recorder, Broken()])
    async with client(app) as c:
        ok = await c.post("/v2/models/churn/infer", json={"inputs": [v2_input(rows(2))]})
        missing = await c.get("/v2/models/nope")
        explained = await c.post("/v1/models/churn:explain", json={"instances": [[1, 2, 3, 4]]})
    assert (ok.status_code, missing.status_code, explained.status_code) == (200, 404, 200)
    first, second, third = recorder.requests
    assert {k: v for k, v in first.items() if k != "duration_s"} == {
        "endpoint": "churn",
        "version": "1",
        "protocol": "v2",
        "verb": "infer",
        "status": 200,
    }
    assert first["duration_s"] > 0
    assert second["endpoint"] is None and second["status"] == 404
    assert (third["protocol"], third["verb"]) == ("v1", "explain")
    stages = [(s["endpoint"], s["version"], s["stage"]) for s in recorder.stages]
    assert stages == [
        ("churn", "1", "preprocess"),
        ("churn", "1", "predict"),
        ("churn", "1", "postprocess"),
        ("churn", "1", "preprocess"),
        ("churn", "1", "explain"),
    ]
