"""Who may reach a Headwater server: loopback by default, a bearer token anywhere else.

The model server (`headwater serve`, `deploy_model`), the web UI (`headwater ui`) and
TensorBoard (`headwater tensorboard`) share these rules:

- `read_token` reads the token: the one given (`--token`), else `$HEADWATER_TOKEN`.
- `check_bind` refuses to listen beyond this machine (`is_loopback`) without a token.
- `TokenAuth`, an ASGI middleware, answers every request that lacks the token through a
  callback of the server's own (each server words its 401 its own way). Tokens are compared
  in constant time (`tokens_match`).

TensorBoard has no login, so `headwater tensorboard` listens on loopback only and needs no
middleware. Every CLI command imports this module to build its parser, so it imports only
`os` up front. It imports no web library: `TokenAuth` is plain ASGI, and the cookie
login that only the UI (a Starlette app) uses imports Starlette when a request needs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from headwater import config
from headwater.errors import InvalidArgumentError

__all__ = [
    "TOKEN_ENV",
    "TokenAuth",
    "check_bind",
    "is_loopback",
    "read_token",
    "tokens_match",
]

#: The environment variable a token is read from (safer than --token, which `ps` shows).
TOKEN_ENV = config.TOKEN_ENV

# The ASGI types, as Starlette spells them (`starlette.types`), without importing it.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: What `TokenAuth` calls for a refused request: `(scope, missing)` -> the ASGI app that
#: answers it; `missing` is True when the request sent no `Authorization` header at all.
Refusal = Callable[[Scope, bool], ASGIApp]


def read_token(given: str | None = None) -> str | None:
    """The token a server guards itself with: `given` (`--token`), else `$HEADWATER_TOKEN`.

    Args:
        given: The token passed on the command line or to the API, if any.

    Returns:
        The token, or None when neither is set (an empty value counts as unset).
    """
    return given or config.token() or None


def is_loopback(host: str) -> bool:
    """True if `host` is a loopback address (127.0.0.0/8, ::1, `[::1]`) or `localhost`."""
    import ipaddress

    if host.strip().lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, token: str | None, *, exposes: str = "call your models") -> None:
    """Refuse a non-loopback `host` without a token.

    Args:
        host: The address the server is about to listen on.
        token: The server's token; None or empty for none.
        exposes: What anyone could do on an open server, for the message ("see your runs").

    Raises:
        InvalidArgumentError: `host` is reachable from other machines and `token` is empty.
    """
    if not is_loopback(host) and not token:
        raise InvalidArgumentError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            f"{exposes}. Set {TOKEN_ENV} (or pass --token T); clients then send "
            "'Authorization: Bearer T'. Or serve on 127.0.0.1"
        )


def tokens_match(given: str | bytes, token: str) -> bool:
    """True if `given` is `token`, compared in constant time; an empty `given` never is."""
    import hmac

    sent = given.encode() if isinstance(given, str) else given
    return bool(sent) and hmac.compare_digest(sent, token.encode())


class TokenAuth:
    """ASGI middleware: an HTTP request must carry the token, or it is refused.

    A request is let through if its path is in `open_paths`, if it sends
    `Authorization: Bearer <token>` (the scheme in any case), or, with `cookie` set, if it
    carries that cookie with the token. With `cookie` set, a GET with `?token=<token>` is
    answered 303 to the same URL without it, setting the cookie (HttpOnly, SameSite=Strict),
    so that a browser logs in once and the token leaves the address bar. Anything else gets
    the answer `refuse` builds. An empty token lets nothing through.

    Args:
        app: The app to guard.
        token: The token.
        refuse: Builds the answer to a refused request (see `Refusal`).
        open_paths: Paths served without the token (health probes).
        cookie: The name of the login cookie; None for bearer tokens only.

    Example::

        app.add_middleware(TokenAuth, token="s3cret", refuse=my_401)
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        refuse: Refusal,
        open_paths: Collection[str] = (),
        cookie: str | None = None,
    ) -> None:
        self.app = app
        self._token = token
        self._refuse = refuse
        self._open_paths = frozenset(open_paths)
        self._cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self.app(scope, receive, send)
            return
        if self._cookie is not None and scope["method"] == "GET":
            login = _cookie_login(scope, self._token, self._cookie)
            if login is not None:
                await login(scope, receive, send)
                return
        sent = _authorization(scope)
        if (sent is not None and self._bearer_matches(sent)) or (
            self._cookie is not None and self._cookie_matches(scope)
        ):
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, sent is None)(scope, receive, send)

    def _bearer_matches(self, sent: bytes) -> bool:
        scheme, _, credentials = sent.strip().partition(b" ")
        return scheme.lower() == b"bearer" and tokens_match(credentials.strip(), self._token)

    def _cookie_matches(self, scope: Scope) -> bool:
        from starlette.requests import Request

        assert self._cookie is not None
        return tokens_match(Request(scope).cookies.get(self._cookie, ""), self._token)


def _authorization(scope: Scope) -> bytes | None:
    """The first `Authorization` header's value, None if there is none."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bytes(value)
    return None


def _cookie_login(scope: Scope, token: str, cookie: str) -> ASGIApp | None:
    """The 303 that sets the login cookie, if the query carries the right `token`."""
    from urllib.parse import urlencode

    from starlette.requests import Request
    from starlette.responses import RedirectResponse

    request = Request(scope)
    given = request.query_params.get("token")
    if given is None or not tokens_match(given, token):
        return None
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(cookie, token, httponly=True, samesite="strict")
    return response
