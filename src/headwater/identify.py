"""`Identify`: the ASGI middleware that finds who sent each request to `headwater server` and
`headwater ui` (`headwater.access.Principal`): a bearer token or the login cookie, or the user a
trusted proxy names in a header (`--trusted-proxy`, `--user-header`: the header is read only
from those addresses). The caller's `identify` says what the credentials are worth
(`ui.identity.Gate`). Plain ASGI, as `security`: Starlette is imported when a request needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.security import ASGIApp, Receive, Scope, Send, _authorization

__all__ = ["Identifier", "Identify", "IdentityRefusal", "trusted_networks"]

#: What `Identify` calls to learn who a request is: `(token, user)` -> the principal, or None
#: to refuse (401). `token` is the bearer token or login cookie sent (None: none), `user` the
#: user a trusted proxy named (None: none, or not from a trusted proxy). It may read a store
#: (it runs on a worker thread), and raise `PermissionDeniedError` (answered 403).
Identifier = Callable[[str | None, str | None], Any]
#: What `Identify` calls for a principal it may not let in: `(scope, status, message)`.
IdentityRefusal = Callable[[Scope, int, str], ASGIApp]


class Identify:
    """ASGI middleware: find who sent each HTTP request, or refuse it.

    The credentials, in this order:

    1. From an address in `trusted` (a proxy's), the `user_header` (its value less
       `user_prefix`); sent twice, the request is refused. From any other address the header
       is ignored: a client cannot name itself.
    2. `Authorization: Bearer <token>`, else the `cookie` (the web UI's login).

    `identify(token, user)` gives the principal (see `Identifier`); it is put in the scope's
    state (`request.state.principal`). Paths in `open_paths` pass without one. With `cookie`,
    a GET with `?token=T` that `identify` accepts is answered 303 to the same URL without it,
    setting the cookie (HttpOnly, SameSite=Strict). Refusals are answered by `refuse`.

    Args:
        app: The app to guard.
        identify: Credentials -> principal (see `Identifier`).
        refuse: Builds the answer to a refusal (401, or 403 for a known user denied).
        trusted: Proxy addresses or networks (`10.0.0.5`, `10.0.0.0/8`, `::1`).
        user_header: The header a trusted proxy names the user in (`kubeflow-userid`).
        user_prefix: Taken off the header's value (`accounts.google.com:`).
        open_paths: Paths served to anyone (health probes).
        cookie: The login cookie's name; None for bearer tokens only.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        identify: Identifier,
        refuse: IdentityRefusal,
        trusted: Iterable[str] = (),
        user_header: str = "kubeflow-userid",
        user_prefix: str = "",
        open_paths: Collection[str] = (),
        cookie: str | None = None,
    ) -> None:
        self.app = app
        self._identify = identify
        self._refuse = refuse
        self._trusted = trusted_networks(trusted)
        self._header = user_header.strip().lower().encode("latin-1")
        self._prefix = user_prefix
        self._open_paths = frozenset(open_paths)
        self._cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self.app(scope, receive, send)
            return
        from anyio.to_thread import run_sync

        from headwater.errors import UserError

        try:
            user = self._proxy_user(scope)
            login = None
            if self._cookie is not None and scope["method"] == "GET":
                login = _query_token(scope)
            token = login if login is not None else self._token(scope)
            principal = await run_sync(self._identify, token, user)
        except UserError as exc:
            await self._refuse(scope, 403, str(exc))(scope, receive, send)
            return
        if principal is None:
            await self._refuse(scope, 401, _why_refused(token, user))(scope, receive, send)
            return
        if login is not None and getattr(principal, "kind", "") != "anyone":
            await _login_redirect(scope, login, self._cookie or "")(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)

    def _proxy_user(self, scope: Scope) -> str | None:
        """The user a trusted proxy names, None if the request is not from one (or names none).

        Raises:
            InvalidArgumentError: The header is sent more than once, or names no one.
        """
        if not self._trusted:
            return None
        values = [bytes(v) for k, v in scope.get("headers", ()) if k == self._header]
        if not values or not _from_trusted(scope, self._trusted):
            return None
        if len(values) > 1:
            raise InvalidArgumentError(
                f"the {self._header.decode()} header was sent {len(values)} times: a trusted "
                "proxy names one user"
            )
        value = values[0].decode("latin-1").strip()
        if self._prefix and value.startswith(self._prefix):
            value = value[len(self._prefix) :]
        if not value:
            raise InvalidArgumentError(f"the {self._header.decode()} header names no user")
        return value

    def _token(self, scope: Scope) -> str | None:
        sent = _authorization(scope)
        if sent is not None:
            scheme, _, credentials = sent.strip().partition(b" ")
            if scheme.lower() == b"bearer" and credentials.strip():
                return credentials.strip().decode("latin-1")
            return ""  # sent, but not a bearer token: never valid
        if self._cookie is not None:
            from starlette.requests import Request

            found = Request(scope).cookies.get(self._cookie)
            if found:
                return found
        return None


def trusted_networks(addresses: Iterable[str]) -> tuple[Any, ...]:
    """`--trusted-proxy` values as networks (an address is a network of one).

    Raises:
        InvalidArgumentError: A value is not an IP address or network.
    """
    import ipaddress

    found = []
    for given in addresses:
        try:
            found.append(ipaddress.ip_network(given.strip().strip("[]"), strict=False))
        except ValueError:
            raise InvalidArgumentError(
                f"--trusted-proxy takes an IP address or network (10.0.0.5, 10.0.0.0/24, ::1), "
                f"got {given!r}: a proxy is trusted by the address its requests come from"
            ) from None
    return tuple(found)


def _from_trusted(scope: Scope, trusted: tuple[Any, ...]) -> bool:
    import ipaddress

    client = scope.get("client")
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in trusted)


def _why_refused(token: str | None, user: str | None) -> str:
    if token is None and user is None:
        return (
            "this server needs to know who you are: send 'Authorization: Bearer TOKEN' "
            "(kfp.Client(existing_token=TOKEN)), or open a page once with ?token=TOKEN"
        )
    return (
        "this token is not valid here (wrong, or revoked): ask an admin for one "
        "('headwater server tokens add NAME ...')"
    )


def _query_token(scope: Scope) -> str | None:
    from urllib.parse import parse_qsl

    for key, value in parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1")):
        if key == "token":
            return value
    return None


def _login_redirect(scope: Scope, token: str, cookie: str) -> ASGIApp:
    """The 303 that sets the login cookie and takes the token out of the address bar."""
    from urllib.parse import urlencode

    from starlette.requests import Request
    from starlette.responses import RedirectResponse

    request = Request(scope)
    rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(cookie, token, httponly=True, samesite="strict")
    return response
