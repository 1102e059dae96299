"""The UI's FastAPI app: the JSON API, the pages, the static files, token checks, errors.

Every request is identified (`headwater.identify.Identify`, with `ui.identity.Gate`): with a
token, or with the store's personal tokens and proxy users (`headwater.access`), it must
carry one: `Authorization: Bearer T` (API clients), or the `headwater_token` cookie that a
page visit with `?token=T` sets once (HttpOnly, SameSite=Strict) before redirecting to the
same URL without it; or come from a trusted proxy that names its user. Its principal decides
what it may read and change (`ui.app_state.principal_of`). Whatever the token,
`headwater.security.BrowserGuard` refuses (403) a `Host` that is not a loopback name or one of
`allowed_hosts`, and a change sent from another site's page; and (415) a POST to the API that
is not JSON, which is all the pages' scripts send (the pages' own forms only GET). Errors are
JSON `{"error": "..."}` under `/api/`, and a short HTML page elsewhere; never a traceback.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.errors import (
    ConflictError,
    HeadwaterError,
    NotFoundError,
    PermissionDeniedError,
    UserError,
)
from headwater.identify import Identify
from headwater.security import BrowserGuard, allowed_host
from headwater.ui.body_limit import DEFAULT_MAX_BODY_MB, BodyLimit

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from fastapi import FastAPI, Request
    from starlette.responses import Response
    from starlette.types import Scope

__all__ = ["COOKIE", "SECURITY_HEADERS", "STATIC", "create_app", "error_response", "status_of"]

if TYPE_CHECKING:
    from headwater.ui.audit import AuditLog
    from headwater.ui.control import RunControl
    from headwater.ui.identity import Gate

    #: An API's error body: (HTTP status, message) -> the JSON it answers.
    ErrorBody = Callable[[int, str], dict[str, Any]]

COOKIE = "headwater_token"
#: On every response. The policy lets pages load only this server's own scripts, styles and
#: API (nothing from the network), and keeps other sites from framing them; inline styles
#: stay allowed for HTML artifacts, which render in a sandboxed iframe without scripts.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
STATIC = Path(__file__).parent / "static"
_log = logging.getLogger(__name__)


def create_app(
    metadata_url: str | None = None,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] = (),
    runs: RunControl | None = None,
    api_prefixes: Mapping[str, ErrorBody] | None = None,
    uploads: Iterable[str] = (),
    open_paths: Iterable[str] = (),
    max_body_bytes: int = int(DEFAULT_MAX_BODY_MB * 2**20),
    gate: Gate | None = None,
    trusted_proxies: Iterable[str] = (),
    user_header: str = "kubeflow-userid",
    user_prefix: str = "",
    audit: AuditLog | None = None,
) -> FastAPI:
    """The dashboard and its API over the metadata store at `metadata_url`.

    Args:
        metadata_url: A SQLAlchemy URL; None reads the default store (HEADWATER_HOME).
        token: If given, every request must present it (see the module docstring).
        allowed_hosts: `Host` names answered to besides loopback's (`--allow-host`; `"*"`
            for any; see `headwater.security.hosts_for_bind` for a server beyond loopback).
        runs: What starts, stops, retries and deletes runs (`headwater server` passes its
            queue's operations); None: `LocalRuns`, runs started in this process.
        api_prefixes: Other JSON APIs mounted on the app (path prefix -> their error body,
            `(status, message) -> dict`): they take JSON only, and the guards' refusals
            are answered in their form.
        uploads: Paths of those that also take a multipart file upload.
        open_paths: Paths answered without the token (a health check).
        max_body_bytes: The largest request body read (`ui.body_limit`); larger is 413.
        gate: Who may use the app (`ui.identity.Gate`); None: the principals of the store
            at `metadata_url`, and `token`.
        trusted_proxies: Addresses whose `user_header` names the user (`--trusted-proxy`).
        user_header: That header (KFP's `kubeflow-userid`).
        user_prefix: Taken off its value.
        audit: Records every request that may change something (`ui.audit.AuditLog`).

    Raises:
        MissingDependencyError: The `ui` extra is not installed.
        InvalidArgumentError: An allowed host is not a host name.
    """
    from headwater.ui._deps import require_ui

    hosts = tuple(allowed_host(name) for name in allowed_hosts)
    require_ui()
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException

    from headwater.ui import api_routes, catalog_routes, page_routes, principal_routes

    app = FastAPI(
        title="Headwater",
        description="Runs, tasks, logs, artifacts and lineage recorded by Headwater.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    from headwater.ui.control import LocalRuns

    app.state.metadata_url = metadata_url
    app.state.token = token
    app.state.runs = runs if runs is not None else LocalRuns(metadata_url)
    app.state.api_prefixes = dict(api_prefixes or {})
    from fastapi import Depends

    from headwater.ui.access import guard

    allowed = [Depends(guard)]  # what each route names, allowed to its principal (`ui.access`)
    app.include_router(api_routes.router, prefix="/api/v1", dependencies=allowed)
    app.include_router(catalog_routes.api, prefix="/api/v1", dependencies=allowed)
    app.include_router(principal_routes.router, prefix="/api/v1", dependencies=allowed)
    app.include_router(page_routes.router, dependencies=allowed)
    app.include_router(catalog_routes.pages, dependencies=allowed)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, refuse=_guard_refusal)
    trusted = tuple(trusted_proxies)
    if gate is None:
        from headwater.metadata import open_reader
        from headwater.ui.identity import Gate

        gate = Gate(lambda: open_reader(metadata_url), token, trusted_proxy=bool(trusted))
    app.state.gate = gate
    app.add_middleware(
        Identify,
        identify=gate.identify,
        refuse=_guard_refusal,
        trusted=trusted,
        user_header=user_header,
        user_prefix=user_prefix,
        cookie=COOKIE,
        open_paths=tuple(open_paths),
    )
    if audit is not None:  # outside Identify: refused requests are recorded too
        from headwater.ui.audit import AuditMiddleware

        app.add_middleware(AuditMiddleware, log=audit)
    app.add_middleware(
        BrowserGuard,
        refuse=_guard_refusal,
        allowed_hosts=hosts,
        json_only=("/api/", *app.state.api_prefixes),
        uploads=uploads,
    )

    @app.middleware("http")  # added after the guards: outside them, so on refusals too
    async def security_headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(HeadwaterError)
    async def headwater_error(request: Request, exc: HeadwaterError) -> Response:
        return error_response(request, status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return error_response(request, 400, f"bad request: {problems}")

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error_response(request, exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # The exception's text may hold a query or a path: it goes to the log, not the client.
        _log.exception("unexpected error on %s", request.url.path)
        return error_response(
            request, 500, f"internal error ({type(exc).__name__}): the server's log says more"
        )

    return app


def status_of(exc: HeadwaterError) -> int:
    """The HTTP status of one of our errors: 404 not found, 409 a conflict, 403 not allowed,
    400 another user error, 500 ours."""
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    if isinstance(exc, PermissionDeniedError):
        return 403
    return 400 if isinstance(exc, UserError) else 500


def error_response(request: Request, code: int, message: str) -> Response:
    """`{"error": message}` for the API; a small escaped HTML page for pages."""
    from starlette.responses import HTMLResponse, JSONResponse

    for prefix, body in getattr(request.app.state, "api_prefixes", {}).items():
        if request.url.path.startswith(prefix):  # another API's own error form (KFP's)
            return JSONResponse(body(code, message), status_code=code)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=code)
    from headwater.ui.page_routes import render

    return HTMLResponse(render("error.html", code=code, message=message), status_code=code)


def _guard_refusal(scope: Scope, status: int, message: str) -> Response:
    from starlette.requests import Request

    return error_response(Request(scope), status, message)
