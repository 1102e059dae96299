"""`BodyLimit`: a request body over a size is refused while it is read, before the app holds it.

The web UI's API and `headwater server`'s KFP API read whole bodies (a pipeline spec, a run's
arguments): without a bound, one request of a few hundred megabytes (a `display_name`, a spec)
would be held in memory and stored. A `Content-Length` over the limit is answered 413 at once;
a body sent in chunks is counted as it arrives and refused the moment it passes the limit
(`HTTPException(413)`, which the app answers in its own error form).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["DEFAULT_MAX_BODY_MB", "BodyLimit"]

#: The default limit in MiB: a compiled pipeline of thousands of tasks is a few MiB.
DEFAULT_MAX_BODY_MB = 32.0

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: at most `max_bytes` of request body (see the module docstring).

    Args:
        app: The app to guard.
        max_bytes: The largest body taken.
        refuse: Builds the 413 answer to a `Content-Length` over the limit.
    """

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, refuse: Callable[[Scope, int, str], ASGIApp]
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self._refuse = refuse

    def _message(self) -> str:
        return (
            f"the request body is over the limit of {self.max_bytes:,} bytes (the server's "
            "--max-request-mb)"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(scope, 413, self._message())(scope, receive, send)
                    return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    from starlette.exceptions import HTTPException

                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, counted, send)
