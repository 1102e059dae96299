"""Who may call the server: loopback by default, a bearer token anywhere else.

`check_bind(host, token)` refuses to listen beyond this machine without a token. With a token,
`TokenAuth` answers 401 `{"error": ...}` to every request that lacks
`Authorization: Bearer <token>`, except the V2 health probes (`/v2/health/live`,
`/v2/health/ready`), which say nothing about any model and which load balancers and
orchestrators call without credentials.
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.types import ASGIApp, Receive, Scope, Send

from headwater.errors import InvalidArgumentError
from headwater.serving.errors import UnauthorizedError
from headwater.serving.wire import error_response

#: The environment variable the CLI reads the token from (safer than --token, which `ps` shows).
TOKEN_ENV = "HEADWATER_TOKEN"
#: Paths served without the token.
OPEN_PATHS = frozenset({"/v2/health/live", "/v2/health/ready"})


def is_loopback(host: str) -> bool:
    """True if `host` is a loopback address (127.0.0.0/8, ::1) or `localhost`."""
    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback `host` without a token.

    Raises:
        InvalidArgumentError: `host` is reachable from other machines and `token` is empty.
    """
    if not is_loopback(host) and not token:
        raise InvalidArgumentError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            f"call your models. Set {TOKEN_ENV} (or pass --token T); clients then send "
            "'Authorization: Bearer T'. Or serve on 127.0.0.1"
        )


class TokenAuth:
    """ASGI middleware: a request must carry `Authorization: Bearer <token>`.

    Args:
        app: The app to guard.
        token: The token; compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise InvalidArgumentError("TokenAuth needs a non-empty token")
        self.app = app
        self._expected = f"bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            sent = _authorization(scope)
            if sent is None:
                error = UnauthorizedError(
                    "this server needs a token: send 'Authorization: Bearer <token>'"
                )
                await error_response(error)(scope, receive, send)
                return
            if not self._matches(sent):
                await error_response(UnauthorizedError("the bearer token is not this server's"))(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)

    def _matches(self, sent: bytes) -> bool:
        scheme, _, credentials = sent.strip().partition(b" ")
        candidate = scheme.lower() + b" " + credentials.strip()
        return hmac.compare_digest(candidate, self._expected)


def _authorization(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bytes(value)
    return None
