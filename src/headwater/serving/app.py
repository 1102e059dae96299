"""`create_app`: the model server as an ASGI app (FastAPI), serving KServe V1 and V2.

    from headwater.serving.app import create_app

    app = create_app(["churn@production", "iris=/models/iris.joblib"], token="s3cret")
    # uvicorn.run(app, host="127.0.0.1", port=8080), or httpx.ASGITransport(app) in tests

The layers, outermost first: `ObserveRequests` (timing, the version header, hooks, a JSON
500 for anything unexpected), `headwater.security.BrowserGuard` (a `Host` that is not a
loopback name or one of `allowed_hosts`, a request from another site's page, or an admin
change not sent as JSON, is refused 403 or 415), `headwater.security.TokenAuth` when there
is a token (every request but the health probes needs it; see `OPEN_PATHS`),
`ProtocolRoutes` (the V1 and V2 routes, and the Triton extensions of
`headwater.serving.triton`, called without FastAPI's routing machinery), then
FastAPI with the same routes, the admin API (`headwater.serving.admin`) and `/metrics`
(`headwater.serving.metrics`). Every error is `{"error": "..."}`: FastAPI's own 404/405
and 422 answers are replaced. The app has no OpenAPI pages: the protocols are documented by
KServe.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from headwater._version import __version__
from headwater.errors import HeadwaterError, InvalidArgumentError, UserError
from headwater.security import BrowserGuard, TokenAuth, allowed_host
from headwater.serving import triton, v1, v2
from headwater.serving.admin import ChangeLog, admin_router
from headwater.serving.config import DEFAULT_MAX_BODY_BYTES
from headwater.serving.context import ServingContext
from headwater.serving.errors import (
    ForbiddenError,
    InvalidInputError,
    ModelNotFoundError,
    ProtocolError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
)
from headwater.serving.observe import ObserveRequests, ServingHooks
from headwater.serving.repository import ModelRepository
from headwater.serving.routing import ProtocolRoutes
from headwater.serving.source import ModelSource
from headwater.serving.wire import error_response

__all__ = ["DEFAULT_MAX_BODY_BYTES", "OPEN_PATHS", "create_app"]

#: Paths served without the token: the health probes (V2's, and KServe's liveness at `/`),
#: which say nothing about any model and which load balancers and orchestrators call
#: without credentials.
OPEN_PATHS = frozenset({"/", "/v2/health/live", "/v2/health/ready"})


def create_app(
    models: ModelRepository | Iterable[str | ModelSource],
    *,
    token: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    hooks: Sequence[ServingHooks] = (),
    admin_changes: bool = True,
    change_log: ChangeLog | None = None,
    metrics: bool = True,
    allowed_hosts: Iterable[str] = (),
    grpc: tuple[str, int] | None = None,
) -> FastAPI:
    """The model server app.

    Args:
        models: A loaded `ModelRepository`, or MODEL specs / `ModelSource`s to resolve and
            load here (see `headwater.serving.resolve`).
        token: When given, every request but the health probes must carry
            `Authorization: Bearer <token>`.
        max_body_bytes: The largest request body taken; larger ones get 413.
        hooks: Called after every request and prediction stage (metrics).
        admin_changes: Let the admin API change traffic, load, unload and reload
            (`headwater.serving.admin`); False answers those changes 409.
        change_log: Where this worker process writes its admin changes for the server's
            other workers (None: a server of one process).
        metrics: Serve Prometheus metrics at `/metrics` (`headwater.serving.metrics`), in a
            registry of this app's own.
        allowed_hosts: `Host` names answered to besides loopback's (`--allow-host`; `"*"`
            for any; see `headwater.security.hosts_for_bind` for a server beyond loopback).
        grpc: (host, port) to serve the Open Inference Protocol over gRPC on as well, from
            the app's start to its end (`headwater.serving.grpc_service`); None: not.

    Raises:
        UserError: A spec names nothing servable, or a model fails to load.
        InvalidArgumentError: `max_body_bytes` is not positive, or an allowed host is not a
            host name.
    """
    if (
        isinstance(max_body_bytes, bool)
        or not isinstance(max_body_bytes, int)
        or max_body_bytes < 1
    ):
        raise InvalidArgumentError(
            f"max_body_bytes must be a positive integer, got {max_body_bytes!r}"
        )
    hosts = tuple(allowed_host(name) for name in allowed_hosts)  # checked before loading
    repository = models if isinstance(models, ModelRepository) else _load(models)
    app = FastAPI(
        title="Headwater model server",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=_lifespan,
    )
    hooks = (*hooks, triton.StatisticsHooks())
    if metrics:
        from headwater.serving.metrics import PrometheusHooks, metrics_router

        exporter = PrometheusHooks(repository)
        hooks = (*hooks, exporter)
        app.include_router(metrics_router(exporter))
    app.state.headwater = ServingContext(repository, hooks, max_body_bytes)
    app.state.grpc = None if grpc is None else (*grpc, token)
    app.include_router(v1.router)
    app.include_router(triton.router)  # before V2's: `/v2/models/stats` is not a model
    app.include_router(v2.router)
    app.include_router(admin_router(writable=admin_changes, changes=change_log))
    app.add_exception_handler(ProtocolError, _protocol_error)
    app.add_exception_handler(UserError, _user_error)
    app.add_exception_handler(HeadwaterError, _headwater_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    protocol_routes = [*v1.router.routes, *triton.router.routes, *v2.router.routes]
    app.add_middleware(
        ProtocolRoutes, routes=protocol_routes, exception_handlers=app.exception_handlers
    )  # added first: innermost of ours, behind the token check
    if token:
        app.add_middleware(TokenAuth, token=token, refuse=_refuse, open_paths=OPEN_PATHS)
    app.add_middleware(
        BrowserGuard, refuse=_guard_refusal, allowed_hosts=hosts, json_only=("/admin/",)
    )
    app.add_middleware(ObserveRequests, hooks=hooks)  # added last: outermost
    return app


#: Seconds a stopping server gives gRPC calls in flight.
GRPC_GRACE_S = 5.0


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the gRPC listener, if any (stopped at the end). Then move what is alive
    (modules, the models, the app) out of the garbage collector's sight: a full collection
    walked all of it, ~100 ms with an XGBoost model loaded, once every few thousand requests,
    and that pause was the latency tail."""
    server = None
    if app.state.grpc is not None:
        from headwater.serving import grpc_service

        server = await grpc_service.start(app.state.headwater, *app.state.grpc)
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        if server is not None:
            await server.stop(grace=GRPC_GRACE_S)


def _load(models: Iterable[str | ModelSource]) -> ModelRepository:
    from headwater.serving.resolve import resolve

    sources = [m if isinstance(m, ModelSource) else resolve(m) for m in models]
    return ModelRepository.from_sources(sources)


def _refuse(scope: Scope, missing: bool) -> Response:
    """The 401 `{"error": ...}` (with `WWW-Authenticate: Bearer`) for a request without the
    token (`missing`) or with another."""
    if missing:
        return error_response(
            UnauthorizedError("this server needs a token: send 'Authorization: Bearer <token>'")
        )
    return error_response(UnauthorizedError("the bearer token is not this server's"))


def _guard_refusal(scope: Scope, status: int, message: str) -> Response:
    """The `{"error": ...}` for a request `BrowserGuard` refuses: 403, or 415 (not JSON)."""
    kind = UnsupportedMediaTypeError if status == 415 else ForbiddenError
    return error_response(kind(message))


async def _protocol_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProtocolError)
    return error_response(exc)


async def _user_error(request: Request, exc: Exception) -> Response:
    return error_response(InvalidInputError(str(exc)))


async def _headwater_error(request: Request, exc: Exception) -> Response:
    return error_response(ProtocolError(f"{type(exc).__name__}: {exc}"))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error: ProtocolError = ModelNotFoundError(
            f"no route {request.method} {request.url.path} (V1: /v1/models/{{name}}:predict, "
            "V2: /v2/models/{name}/infer)"
        )
    else:
        error = ProtocolError(f"{request.method} {request.url.path}: {exc.detail}")
        error.status = exc.status_code
    response = error_response(error)
    for key, value in (exc.headers or {}).items():
        response.headers[key] = value
    return response


async def _validation_error(request: Request, exc: Exception) -> Response:
    details: Any = getattr(exc, "errors", lambda: [])()
    first = details[0] if details else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    message = first.get("msg", "invalid request")
    return error_response(
        InvalidInputError(f"invalid request: {where}: {message}".replace(": :", ":"))
    )
