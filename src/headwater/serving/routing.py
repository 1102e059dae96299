"""`ProtocolRoutes`: the V1 and V2 routes dispatched straight to their handlers.

FastAPI's path to a handler (its router trying each route, the exception and exit-stack
middleware, solving the handler's parameters) cost more per request than decoding a tensor
and calling a small model together. The protocol handlers need none of it: each takes the
`Request` and its path parameters as strings and returns a `Response`. So this middleware,
the innermost of the app's own, matches a request against the protocol routes itself and
calls the handler; everything else (the admin API, `/metrics`, a method a route does not
take, a path no route has) goes on to FastAPI as before.

The routes stay registered with FastAPI too, so both paths agree by construction: the table
here is built from the same router declarations (`v1.router`, `v2.router`), in their order,
and an exception a handler raises goes to the app's exception handlers, found as Starlette
finds them (by the exception's class, nearest first).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fastapi.routing import APIRoute
from starlette.convertors import StringConvertor
from starlette.requests import Request
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

#: An app's exception handler, as Starlette keeps them (`app.exception_handlers`).
ExceptionHandler = Callable[[Request, Any], Any]


class ProtocolRoutes:
    """ASGI middleware: serves `routes` itself, passes every other request to `app`.

    Args:
        app: The app behind (FastAPI, with the same routes registered).
        routes: The protocol routes, in the app's order. Each handler must take
            `(request, **path_params)` and return a `Response`; routes with typed path
            parameters (`{n:int}`) or of other kinds are left to `app`.
        exception_handlers: The app's handlers by exception class (`app.exception_handlers`,
            read on each error, so handlers added later count too).
    """

    def __init__(
        self,
        app: ASGIApp,
        routes: Iterable[BaseRoute],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ) -> None:
        self.app = app
        self.routes = [
            r
            for r in routes
            if isinstance(r, APIRoute)
            and all(isinstance(c, StringConvertor) for c in r.param_convertors.values())
        ]
        self._table = [(r.path_regex, frozenset(r.methods or ()), r) for r in self.routes]
        self.exception_handlers = exception_handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A root path (an app mounted under a prefix) is FastAPI's to strip.
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            for regex, methods, route in self._table:
                if method in methods:
                    match = regex.match(path)
                    if match is not None:
                        await self._handle(route, match.groupdict(), scope, receive, send)
                        return
        await self.app(scope, receive, send)

    async def _handle(
        self,
        route: APIRoute,
        params: dict[str, str],
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        scope["path_params"] = params
        scope["route"] = route
        request = Request(scope, receive, send)
        try:
            response = await route.endpoint(request, **params)
        except Exception as exc:
            handler = self._handler_for(exc)
            if handler is None:
                raise
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
        await response(scope, receive, send)

    def _handler_for(self, exc: Exception) -> ExceptionHandler | None:
        for cls in type(exc).__mro__:
            handler = self.exception_handlers.get(cls)
            if handler is not None:
                return handler
        return None


__all__ = ["ProtocolRoutes"]
