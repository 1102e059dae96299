"""The UI's FastAPI app: the JSON API, the pages, the static files, token checks, errors.

With a token, every request must carry it: `Authorization: Bearer T` (API clients), or the
`headwater_token` cookie that a page visit with `?token=T` sets once (HttpOnly,
SameSite=Strict) before redirecting to the same URL without it. Errors are JSON
`{"error": "..."}` under `/api/`, and a short HTML page elsewhere; never a traceback.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from headwater.errors import HeadwaterError, NotFoundError, UserError

if TYPE_CHECKING:
    from fastapi import FastAPI, Request
    from starlette.responses import Response

__all__ = ["COOKIE", "SECURITY_HEADERS", "STATIC", "create_app"]

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


def create_app(metadata_url: str | None = None, token: str | None = None) -> FastAPI:
    """The dashboard and its API over the metadata store at `metadata_url`.

    Args:
        metadata_url: A SQLAlchemy URL; None reads the default store (HEADWATER_HOME).
        token: If given, every request must present it (see the module docstring).

    Raises:
        MissingDependencyError: The `ui` extra is not installed.
    """
    from headwater.ui._deps import require_ui

    require_ui()
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException

    from headwater.ui import api_routes, page_routes

    app = FastAPI(
        title="Headwater",
        description="Runs, tasks, logs, artifacts and lineage recorded by Headwater.",
        openapi_url="/api/v1/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.metadata_url = metadata_url
    app.state.token = token
    app.include_router(api_routes.router, prefix="/api/v1")
    app.include_router(page_routes.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.middleware("http")
    async def check_token(request: Request, call_next: Any) -> Response:
        if token is None:
            response: Response = await call_next(request)
        else:
            response = await _with_token(request, call_next, token)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(HeadwaterError)
    async def headwater_error(request: Request, exc: HeadwaterError) -> Response:
        code = 404 if isinstance(exc, NotFoundError) else 400 if isinstance(exc, UserError) else 500
        return error_response(request, code, str(exc))

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
        _log.exception("unexpected error on %s", request.url.path)
        return error_response(request, 500, f"internal error: {type(exc).__name__}: {exc}")

    return app


def error_response(request: Request, code: int, message: str) -> Response:
    """`{"error": message}` for the API; a small escaped HTML page for pages."""
    from starlette.responses import HTMLResponse, JSONResponse

    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message}, status_code=code)
    from headwater.ui.page_routes import render

    return HTMLResponse(render("error.html", code=code, message=message), status_code=code)


async def _with_token(request: Request, call_next: Any, token: str) -> Response:
    from starlette.responses import RedirectResponse

    given = request.query_params.get("token")
    if given is not None and _same(given, token) and request.method == "GET":
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and _same(value.strip(), token):
        return await call_next(request)  # type: ignore[no-any-return]
    if _same(request.cookies.get(COOKIE, ""), token):
        return await call_next(request)  # type: ignore[no-any-return]
    return error_response(
        request,
        401,
        "this server needs its token: send 'Authorization: Bearer TOKEN', or open a page "
        "once with ?token=TOKEN",
    )


def _same(given: str, token: str) -> bool:
    return bool(given) and hmac.compare_digest(given.encode(), token.encode())
