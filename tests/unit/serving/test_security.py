"""A bearer token on every request but the health probes (bind rules: tests/unit/test_security)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headwater.serving.app import create_app

from .helpers import client


@pytest.mark.anyio
async def test_every_request_but_health_needs_the_token(
    xgboost_model: Callable[..., str],
) -> None:
    app = create_app([xgboost_model()], token="s3cret")
    async with client(app) as anonymous:
        refused = await anonymous.get("/v1/models")
        metadata = await anonymous.get("/v2/models/churn/ready")
        live = await anonymous.get("/v2/health/live")
        ready = await anonymous.get("/v2/health/ready")
    async with client(app, authorization="Bearer nope") as wrong:
        mistaken = await wrong.post("/v1/models/churn:predict", json={"instances": [[1, 2, 3, 4]]})
    async with client(app, authorization="bearer s3cret") as right:
        allowed = await right.post("/v1/models/churn:predict", json={"instances": [[1, 2, 3, 4]]})
    for answer in (refused, metadata):
        assert answer.status_code == 401
        assert answer.json() == {
            "error": "this server needs a token: send 'Authorization: Bearer <token>'"
        }
        assert answer.headers["www-authenticate"] == "Bearer"
    assert mistaken.status_code == 401 and "not this server's" in mistaken.json()["error"]
    assert live.status_code == ready.status_code == allowed.status_code == 200
