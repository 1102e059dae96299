"""`ProtocolRoutes` answers the V1 and V2 routes itself, exactly as FastAPI would."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response

from headwater.serving import v1, v2
from headwater.serving.app import create_app
from headwater.serving.routing import ProtocolRoutes

from .helpers import client, rows, v2_input

pytestmark = pytest.mark.anyio


class Spy:
    """An ASGI app noting the paths it is asked to serve (what `ProtocolRoutes` passes on)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.paths.append(scope["path"])
        await Response(status_code=299)(scope, receive, send)


def test_the_table_holds_every_protocol_route() -> None:
    routes = ProtocolRoutes(Spy(), [*v1.router.routes, *v2.router.routes], {}).routes
    assert len(routes) == len(v1.router.routes) + len(v2.router.routes)


@pytest.mark.parametrize(
    ("method", "path", "served"),
    [
        ("POST", "/v2/models/churn/infer", True),
        ("POST", "/v2/models/churn/versions/2/infer", True),
        ("GET", "/v2/health/ready", True),
        ("POST", "/v1/models/churn:predict", True),
        ("GET", "/v1/models/churn", True),
        ("GET", "/v2/models/churn/infer", False),  # FastAPI's 405
        ("POST", "/admin/models/churn/reload", False),
        ("GET", "/metrics", False),
        ("GET", "/nowhere", False),
    ],
    ids=["infer", "version-infer", "health", "v1-predict", "v1-status", "wrong-method",
         "admin", "metrics", "unknown"],
)  # fmt: skip
async def test_protocol_routes_are_served_and_the_rest_passed_on(
    method: str, path: str, served: bool
) -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    async def endpoint(request: Request, **params: str) -> Response:
        seen.append((request.url.path, params))
        return Response(status_code=204)

    spy = Spy()
    app = ProtocolRoutes(spy, _routes(endpoint), {})
    async with client(app) as c:
        answer = await c.request(method, path)
    assert answer.status_code == (204 if served else 299)
    assert (spy.paths == []) == served
    if served:
        assert seen[0][0] == path


async def test_a_handler_error_goes_to_the_app_handler_for_its_class() -> None:
    class RefusedError(ValueError):
        pass

    async def endpoint(request: Request, **params: str) -> Response:
        raise RefusedError("no")

    async def on_value_error(request: Request, exc: Exception) -> Response:
        return Response(f"handled {type(exc).__name__}", status_code=418)

    app = ProtocolRoutes(Spy(), _routes(endpoint), {ValueError: on_value_error})
    async with client(app) as c:
        answer = await c.post("/v2/models/churn/infer")
    assert (answer.status_code, answer.text) == (418, "handled RefusedError")


async def test_errors_of_the_protocol_routes_keep_their_json(
    xgboost_model: Callable[..., str],
) -> None:
    app = create_app([xgboost_model()])
    async with client(app) as c:
        bad = await c.post("/v2/models/churn/infer", content=b"{not json")
        unknown = await c.post("/v2/models/nope/infer", json={"inputs": [v2_input(rows(1))]})
        wrong_method = await c.get("/v2/models/churn/infer")
    assert (bad.status_code, unknown.status_code, wrong_method.status_code) == (400, 404, 405)
    assert "malformed JSON" in bad.json()["error"]
    assert "nope" in unknown.json()["error"]
    assert set(wrong_method.json()) == {"error"}


async def test_an_app_under_a_root_path_is_left_to_fastapi() -> None:
    spy = Spy()
    app = ProtocolRoutes(spy, v2.router.routes, {})
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/v2/health/live",
        "root_path": "/serving",
        "headers": [],
        "query_string": b"",
    }
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert spy.paths == ["/v2/health/live"]


def _routes(endpoint: Callable[..., Any]) -> list[APIRoute]:
    """Copies of the protocol routes, each calling `endpoint`."""
    copies = []
    for route in [*v1.router.routes, *v2.router.routes]:
        assert isinstance(route, APIRoute)
        copy = APIRoute(route.path, route.endpoint, methods=list(route.methods))
        copy.endpoint = endpoint
        copies.append(copy)
    return copies
