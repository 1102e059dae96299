"""Who may reach a Headwater server: loopback by default, a bearer token anywhere else.

The model server (`headwater serve`, `deploy_model`), the web UI (`headwater ui`) and
TensorBoard (`headwater tensorboard`) share these rules:

- `read_token` reads the token: the one given (`--token`), else `$HEADWATER_TOKEN`.
- `check_bind` refuses to listen beyond this machine (`is_loopback`) without a token.
- `TokenAuth`, an ASGI middleware (the model server's), answers every request that lacks the
  token through a callback of the server's own (each server words its 401 its own way).
  Tokens are compared in constant time (`tokens_match`).
- `headwater.identify.Identify` (beside this module) finds who sent a request to `headwater
  server` and `headwater ui`: a token, or the user a trusted proxy names.
- `BrowserGuard`, an ASGI middleware outside `TokenAuth`, keeps web pages of other sites
  from driving the server through a visitor's browser: it refuses a `Host` that is not the
  server's name (DNS rebinding; `hosts_for_bind` says which names a server answers to), a
  state change sent from another origin (CSRF), and a state change in a content type that
  a page may send anywhere without asking (`text/plain`, forms). Clients that are not
  browsers (curl, KServe's and Triton's clients, `deploy_model`) send no `Origin` and pass.

TensorBoard has no login, so `headwater tensorboard` listens on loopback only and needs no
middleware. Every CLI command imports this module to build its parser, so it imports only
`os` up front. It imports no web library: `TokenAuth` and `BrowserGuard` are plain ASGI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, MutableMapping
from typing import Any

from headwater import config
from headwater.errors import InvalidArgumentError

__all__ = [
    "ALLOW_HOST_HELP",
    "ANY_HOST",
    "TOKEN_ENV",
    "BrowserGuard",
    "TokenAuth",
    "allowed_host",
    "check_bind",
    "hosts_for_bind",
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
#: What `BrowserGuard` calls for a refused request: `(scope, status, message)` -> the ASGI
#: app that answers it; `status` is 403 (a foreign Host or Origin) or 415 (not JSON), and
#: `message` one line naming what was refused and how to get it through.
GuardRefusal = Callable[[Scope, int, str], ASGIApp]
#: In `allowed_hosts`: answer to any `Host` (for a server behind its token off loopback).
ANY_HOST = "*"
#: The help of `--allow-host NAME` (repeatable), which `headwater serve` and `ui` take.
ALLOW_HOST_HELP = (
    "also answer requests whose Host header names this server NAME (repeatable; * for any). "
    "Loopback names are always answered and other names refused (DNS rebinding); on a "
    "non-loopback --host, which needs a token, every name is answered unless --allow-host "
    "is given"
)


def read_token(given: str | None = None, *, file: str | None = None) -> str | None:
    """The token a server guards itself with: `given` (`--token`), else the first line of
    `file` (`--token-file`), else `$HEADWATER_TOKEN`.

    Args:
        given: The token passed on the command line or to the API, if any.
        file: A file holding it (readable only by the server's user, say), if any.

    Returns:
        The token without surrounding blanks, or None when none is set (an empty or
        all-blank value counts as unset, so that `check_bind` refuses an open host for it).

    Raises:
        InvalidArgumentError: `file` cannot be read, or both `given` and `file` are.
    """
    if file is not None:
        if given:
            raise InvalidArgumentError("give the token with --token or --token-file, not both")
        try:
            with open(file, encoding="utf-8") as fh:
                given = fh.readline()
        except (OSError, UnicodeDecodeError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise InvalidArgumentError(
                f"cannot read the token file {file!r}: {why}: give a readable file whose first "
                "line is the token"
            ) from exc
        if not given.strip():
            raise InvalidArgumentError(f"the token file {file!r} is empty: put the token in it")
    return (given or "").strip() or (config.token() or "").strip() or None


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
        token: The server's token; None, empty or blank for none.
        exposes: What anyone could do on an open server, for the message ("see your runs").

    Raises:
        InvalidArgumentError: `host` is reachable from other machines and `token` is empty.
    """
    if not is_loopback(host) and not (token or "").strip():
        raise InvalidArgumentError(
            f"refusing to serve on {host!r} without a token: anyone who can reach it could "
            f"{exposes}. Give it --token-file PATH (or set {TOKEN_ENV}); clients then send "
            "'Authorization: Bearer T'. Or serve on 127.0.0.1"
        )


def hosts_for_bind(host: str, allowed: Iterable[str] = ()) -> tuple[str, ...]:
    """The `Host` names a server listening on `host` answers to beyond the loopback names.

    On loopback, those are `allowed` (`--allow-host`). A server listening beyond loopback
    has a token (`check_bind`) that a page of another site cannot present (it does not know
    it, and the UI's cookie is never sent under another name), so with no `allowed` it
    answers to any name, whatever its clients call the machine; with `allowed` it answers to
    those and to the address it listens on.

    Args:
        host: The address the server listens on.
        allowed: Host names or addresses given with `--allow-host`; `*` for any.

    Returns:
        The names for `BrowserGuard(allowed_hosts=...)`, in lower case.

    Raises:
        InvalidArgumentError: A name is empty, carries a port, or is not a host name.
    """
    import ipaddress

    names = tuple(dict.fromkeys(allowed_host(name) for name in allowed))
    if is_loopback(host):
        return names
    if not names:
        return (ANY_HOST,)
    try:
        own = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return (*names, allowed_host(host))
    return names if own.is_unspecified else tuple(dict.fromkeys((*names, str(own))))


def allowed_host(name: str) -> str:
    """`name` (an `--allow-host` value) as `BrowserGuard` compares it: lower case, an IPv6
    address without brackets, no trailing dot.

    Raises:
        InvalidArgumentError: `name` is empty, carries a port, or is not a host name.
    """
    import ipaddress
    import re

    found = name.strip().lower()
    if found == ANY_HOST:
        return found
    try:
        return str(ipaddress.ip_address(found[1:-1] if found.startswith("[") else found))
    except ValueError:
        pass
    found = found.rstrip(".")
    if not re.fullmatch(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*", found):
        port = " without a port" if re.fullmatch(r"[^:]+:[0-9]*", found) else ""
        raise InvalidArgumentError(
            f"--allow-host takes a host name or address{port} (e.g. ui.example.com, or * "
            f"for any), got {name!r}"
        )
    return found


def tokens_match(given: str | bytes, token: str) -> bool:
    """True if `given` is `token`, compared in constant time; an empty `given` never is."""
    import hmac

    sent = given.encode() if isinstance(given, str) else given
    return bool(sent) and hmac.compare_digest(sent, token.encode())


class TokenAuth:
    """ASGI middleware: an HTTP request must carry the token, or it is refused.

    A request is let through if its path is in `open_paths`, or if it sends
    `Authorization: Bearer <token>` (the scheme in any case). Anything else gets the answer
    `refuse` builds. An empty token lets nothing through. (The web UI and `headwater server`
    identify each request instead: `headwater.identify.Identify`.)

    Args:
        app: The app to guard.
        token: The token.
        refuse: Builds the answer to a refused request (see `Refusal`).
        open_paths: Paths served without the token (health probes).

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
    ) -> None:
        self.app = app
        self._token = token
        self._refuse = refuse
        self._open_paths = frozenset(open_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self._open_paths:
            await self.app(scope, receive, send)
            return
        sent = _authorization(scope)
        if sent is not None and self._bearer_matches(sent):
            await self.app(scope, receive, send)
            return
        await self._refuse(scope, sent is None)(scope, receive, send)

    def _bearer_matches(self, sent: bytes) -> bool:
        scheme, _, credentials = sent.strip().partition(b" ")
        return scheme.lower() == b"bearer" and tokens_match(credentials.strip(), self._token)


def _authorization(scope: Scope) -> bytes | None:
    """The first `Authorization` header's value, None if there is none."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            return bytes(value)
    return None


#: Methods that change nothing, by HTTP's rules: the Origin and content-type rules skip them.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: The request headers the rules read (the first of each counts).
_READ = frozenset({b"host", b"origin", b"sec-fetch-site", b"content-type", b"content-length"})
_ELSEWHERE = "use this server's own pages, or a client that is not a browser (curl, a library)"


class BrowserGuard:
    """ASGI middleware: what a page of another site makes a visitor's browser send is refused.

    Three rules, checked in this order on every HTTP request:

    1. Host: the `Host` header names the server by a loopback name or address
       (`localhost`, 127.0.0.0/8, `[::1]`) or one of `allowed_hosts`. A page of another site
       reaches a local server under a name of its own only by DNS rebinding, and the browser
       then takes the server for part of that site.
    2. Origin: a request that may change something (any method but GET, HEAD, OPTIONS,
       TRACE) does not come from another origin: an `Origin` other than the server's own
       (scheme, host and port, as the request names them), `Origin: null`, or
       `Sec-Fetch-Site: cross-site` is refused. Browsers send these headers; curl and the
       client libraries do not, and pass.
    3. Content type: a POST, PUT or PATCH with a body to a path under one of `json_only`
       (the routes that change state) says it sends JSON (`application/json`, or a `+json`
       type). The types a page may send to any site without asking first (`text/plain`, the
       form encodings, none) are refused, also from a browser that sends no Origin.

    `refuse` answers a refusal (see `GuardRefusal`): 403 for the first two rules, 415 for
    the third. Other scopes (lifespan; neither server takes websockets) pass untouched.

    Args:
        app: The app to guard.
        refuse: Builds the answer to a refused request.
        allowed_hosts: The names answered to beyond loopback's (see `hosts_for_bind`);
            `ANY_HOST` for any.
        json_only: Path prefixes of the routes that change state (`"/admin/"`).
        uploads: Paths under those that also take `multipart/form-data` (a file upload:
            rule 2 still holds them to this server's own pages and non-browser clients).

    Example::

        app.add_middleware(
            BrowserGuard,
            refuse=my_refusal,
            allowed_hosts=hosts_for_bind(host, ["ui.example.com"]),
            json_only=["/api/"],
        )
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        refuse: GuardRefusal,
        allowed_hosts: Iterable[str] = (),
        json_only: Iterable[str] = (),
        uploads: Iterable[str] = (),
    ) -> None:
        self.app = app
        self._refuse = refuse
        allowed = frozenset(allowed_host(name) for name in allowed_hosts)
        self._any_host = ANY_HOST in allowed
        self._named = tuple(sorted(allowed))
        self._hosts = allowed | _LOOPBACK_NAMES
        self._json_only = tuple(json_only)
        self._uploads = frozenset(uploads)
        self._answered: dict[str, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self._refusal(scope)
            if refused is not None:
                await self._refuse(scope, *refused)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, message) for a request the rules refuse; None to let it through. Every
        request pays for this, so a header is decoded only when a rule reads it."""
        seen: dict[bytes, bytes] = {}
        chunked = False
        for key, value in scope.get("headers", ()):  # one pass; ASGI names are lower case
            if key in _READ:
                seen.setdefault(key, value)
            elif key == b"transfer-encoding":
                chunked = True
        raw_host = seen.get(b"host")
        host = None if raw_host is None else bytes(raw_host).decode("latin-1")
        if host is not None and not self._any_host and not self._host_answered(host):
            return 403, self._foreign_host(host, _split_host(host)[0])
        method = scope["method"]
        if method in SAFE_METHODS:
            return None
        raw_origin = seen.get(b"origin")
        if raw_origin is not None:
            origin = bytes(raw_origin).decode("latin-1")
            if not _same_origin(origin, scope.get("scheme", "http"), host):
                own = f"{scope.get('scheme', 'http')}://{host}" if host else "unknown"
                return 403, (
                    f"cross-site request refused: {method} from Origin {origin!r}, not this "
                    f"server's ({own}): {_ELSEWHERE}"
                )
        site = seen.get(b"sec-fetch-site")
        if site is not None and bytes(site).decode("latin-1").strip().lower() == "cross-site":
            return 403, (
                f"cross-site request refused: a page of another site sent {method} "
                f"{scope['path']} (Sec-Fetch-Site: cross-site): {_ELSEWHERE}"
            )
        if method not in ("POST", "PUT", "PATCH") or not scope["path"].startswith(self._json_only):
            return None
        if not chunked and bytes(seen.get(b"content-length", b"0")).strip() == b"0":
            return None  # no body
        raw_kind = seen.get(b"content-type")
        kind = None if raw_kind is None else bytes(raw_kind).decode("latin-1")
        media = (kind or "").partition(";")[0].strip().lower()
        upload = media == "multipart/form-data" and scope["path"] in self._uploads
        if (
            media != "application/json"
            and not (media.startswith("application/") and media.endswith("+json"))
            and not upload
        ):
            return 415, (
                f"{method} {scope['path']} takes JSON only: send 'Content-Type: "
                f"application/json' (got {kind or 'none'!r}), a type no page of another "
                "site can send here"
            )
        return None

    def _host_answered(self, host: str) -> bool:
        """True if the Host header `host` names the server (remembered: one per client)."""
        answered = self._answered.get(host)
        if answered is None:
            if len(self._answered) >= 256:
                self._answered.clear()  # a bound on what foreign names can fill
            answered = self._answered[host] = self._answers_to(_split_host(host)[0])
        return answered

    def _answers_to(self, name: str) -> bool:
        """True if `name` (from the Host header) is loopback or one of `allowed_hosts`."""
        import ipaddress

        if name in self._hosts or is_loopback(name):
            return True
        try:
            return str(ipaddress.ip_address(name)) in self._hosts  # the same address
        except ValueError:
            return False

    def _foreign_host(self, host: str, name: str) -> str:
        names = "".join(f", {n}" for n in self._named)
        return (
            f"Host {host!r} is not a name of this server, which answers to loopback names"
            f"{names} (a page of another site reaches a local server under its own name by "
            f"DNS rebinding): if {name!r} is this server's, start it with --allow-host {name}"
        )


def _split_host(value: str) -> tuple[str, int | None]:
    """A `Host` header's name (lower case, no brackets or trailing dot) and port (or None)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest
    else:
        name, colon, port = value.rpartition(":")
        if not colon:
            name, port = value, ""
    if port and not port.isdigit():
        return value, None  # malformed: a name no allow-list holds
    return name.rstrip("."), int(port) if port else None


def _same_origin(origin: str, scheme: str, host: str | None) -> bool:
    """True if `origin` (an Origin header) is scheme://`host` (the request's Host header)."""
    from urllib.parse import urlsplit

    if host is None:
        return False
    try:
        parts = urlsplit(origin.strip().lower())
        port = parts.port
    except ValueError:
        return False
    default = _DEFAULT_PORTS.get(parts.scheme)
    if default is None or not parts.hostname or parts.path not in ("", "/"):
        return False  # null, opaque or malformed
    name, own_port = _split_host(host)
    return (parts.scheme, parts.hostname.rstrip("."), port or default) == (
        scheme,
        name,
        own_port or _DEFAULT_PORTS.get(scheme),
    )
