"""A bearer token on every request but the health probes, and the browser guard's refusals
in the server's error shape (the rules themselves: tests/unit/test_security)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from headwater.errors import InvalidArgumentError
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


@pytest.mark.anyio
async def test_what_a_browser_was_made_to_send_is_refused_as_json(handler_file: str) -> None:
    app = create_app([f"lengths={handler_file}:Lengths"], token="s3cret")
    token = {"authorization": "Bearer s3cret"}
    load = {"model": f"{handler_file}:Untyped"}
    async with client(app, **token) as c:
        rebound = await c.get("/v1/models", headers={"host": "evil.example:8080"})
        crossed = await c.post(
            "/v1/models/lengths:predict",
            json={"instances": ["ab"]},
            headers={"origin": "http://evil.example:8080"},
        )
        plain = await c.post(
            "/admin/models/other/load",
            content=json.dumps(load),
            headers={"content-type": "text/plain"},
        )
        served = (await c.get("/v1/models")).json()
        loaded = await c.post("/admin/models/other/load", json=load)
    assert rebound.status_code == 403  # before the token: the name is wrong whoever asks
    assert rebound.json() == {
        "error": "Host 'evil.example:8080' is not a name of this server, which answers to "
        "loopback names (a page of another site reaches a local server under its own name "
        "by DNS rebinding): if 'evil.example' is this server's, start it with "
        "--allow-host evil.example"
    }
    assert crossed.status_code == 403
    assert crossed.json()["error"].startswith(
        "cross-site request refused: POST from Origin 'http://evil.example:8080', not this "
        "server's (http://127.0.0.1:8080)"
    )
    assert plain.status_code == 415
    assert plain.json()["error"].startswith(
        "POST /admin/models/other/load takes JSON only: send 'Content-Type: application/json' "
        "(got 'text/plain')"
    )
    assert served == {"models": ["lengths"]}
    assert loaded.status_code == 200 and loaded.json()["loaded"] == "1"


@pytest.mark.anyio
async def test_allowed_hosts_are_answered(handler_file: str) -> None:
    app = create_app([f"lengths={handler_file}:Lengths"], allowed_hosts=["Models.Example."])
    async with client(app) as c:
        named = await c.get("/v1/models", headers={"host": "models.example:8080"})
        other = await c.get("/v1/models", headers={"host": "evil.example"})
    assert named.status_code == 200
    assert other.status_code == 403 and "loopback names, models.example (" in other.text
    with pytest.raises(InvalidArgumentError, match="--allow-host takes a host name"):
        create_app([f"lengths={handler_file}:Lengths"], allowed_hosts=["models.example:80"])
