"""The shared server rules: the token's source, loopback, the bind check, `TokenAuth`, and
`BrowserGuard` with the names a server answers to (`hosts_for_bind`)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.errors import InvalidArgumentError, UserError
from headwater.security import (
    ANY_HOST,
    TOKEN_ENV,
    BrowserGuard,
    TokenAuth,
    check_bind,
    hosts_for_bind,
    is_loopback,
    read_token,
    tokens_match,
)

Scope = dict[str, Any]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("localhost.", True),
        ("0.0.0.0", False),
        ("::", False),
        ("[::]", False),
        ("192.168.1.4", False),
        ("10.0.0.1", False),
        ("myhost.example", False),
        ("localhost.example", False),
        ("", False),
    ],
    ids=repr,
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("given", "env", "token"),
    [
        ("flag", "env", "flag"),
        (None, "env", "env"),
        ("", "env", "env"),
        (None, "", None),
        (None, None, None),
        (None, " \t\n", None),
        ("  ", "env", "env"),
        (None, " s3cret\n", "s3cret"),
    ],
    ids=[
        "flag-wins",
        "env",
        "empty-flag",
        "empty-env",
        "neither",
        "blank-env",
        "blank-flag",
        "padded-env",
    ],
)
def test_read_token(
    monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, token: str | None
) -> None:
    if env is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, env)
    assert read_token(given) == token


def test_a_token_file_gives_its_first_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    file = tmp_path / "token"
    file.write_text(" t0k \nsecond line\n")
    assert read_token(None, file=str(file)) == "t0k"


@pytest.mark.parametrize(
    ("given", "content", "said"),
    [
        ("t", "t0k", "give the token with --token or --token-file, not both"),
        (None, "  \n", "is empty: put the token in it"),
        (None, None, "cannot read the token file"),
    ],
    ids=["both", "empty", "missing"],
)
def test_a_bad_token_file_is_one_line(
    tmp_path: Path, given: str | None, content: str | None, said: str
) -> None:
    file = tmp_path / "token"
    if content is not None:
        file.write_text(content)
    with pytest.raises(InvalidArgumentError) as info:
        read_token(given, file=str(file))
    assert said in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("host", "token"),
    [("127.0.0.1", None), ("localhost", ""), ("0.0.0.0", "t0ken"), ("::", "t0ken")],
    ids=repr,
)
def test_check_bind_allows(host: str, token: str | None) -> None:
    check_bind(host, token)


@pytest.mark.parametrize("token", [None, "", "  "], ids=["none", "empty", "blank"])
def test_check_bind_refuses_an_open_host_without_a_token(token: str | None) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        check_bind("0.0.0.0", token, exposes="see your runs")
    message = str(refused.value)
    assert message.startswith("refusing to serve on '0.0.0.0' without a token")
    assert "could see your runs" in message and "--token" in message and TOKEN_ENV in message


def test_a_non_loopback_host_needs_a_token_to_serve_models() -> None:
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "t0ken")
    refused = re.escape("refusing to serve on '0.0.0.0' without a token")
    with pytest.raises(UserError, match=refused):
        check_bind("0.0.0.0", None)


@pytest.mark.parametrize(
    ("given", "token", "same"),
    [
        ("s3cret", "s3cret", True),
        (b"s3cret", "s3cret", True),
        ("s3cret ", "s3cret", False),
        ("nope", "s3cret", False),
        ("", "s3cret", False),
        ("", "", False),
        ("tökén", "tökén", True),
    ],
    ids=repr,
)
def test_tokens_match(given: str | bytes, token: str, same: bool) -> None:
    assert tokens_match(given, token) is same


# -- TokenAuth through a real ASGI app ------------------------------------------------------


async def _hello(scope: Scope, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def _refuse(scope: Scope, missing: bool) -> Any:
    async def answer(scope: Scope, receive: Any, send: Any) -> None:
        body = json.dumps({"missing": missing, "path": scope["path"]}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": body})

    return answer


def _get(app: Any, path: str = "/data", **kwargs: Any) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        cookies = kwargs.pop("cookies", None)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", cookies=cookies
        ) as client:
            return await client.get(path, **kwargs)

    return asyncio.run(call())


def _guarded(**options: Any) -> TokenAuth:
    return TokenAuth(_hello, "s3cret", refuse=_refuse, **options)


@pytest.mark.parametrize(
    "authorization",
    ["Bearer s3cret", "bearer s3cret", "BEARER  s3cret ", " Bearer s3cret"],
    ids=repr,
)
def test_the_right_bearer_token_passes(authorization: str) -> None:
    answer = _get(_guarded(), headers={"Authorization": authorization})
    assert (answer.status_code, answer.text) == (200, "hello")


@pytest.mark.parametrize(
    "authorization",
    ["Bearer nope", "Bearer", "Bearer s3cretX", "Basic s3cret", "s3cret", ""],
    ids=repr,
)
def test_a_wrong_token_is_refused_as_wrong(authorization: str) -> None:
    answer = _get(_guarded(), headers={"Authorization": authorization})
    assert answer.status_code == 401
    assert answer.json() == {"missing": False, "path": "/data"}


def test_a_missing_token_is_refused_as_missing() -> None:
    answer = _get(_guarded())
    assert answer.status_code == 401
    assert answer.json() == {"missing": True, "path": "/data"}


def test_open_paths_need_no_token() -> None:
    app = _guarded(open_paths={"/health"})
    assert _get(app, "/health").status_code == 200
    assert _get(app, "/health/x").status_code == 401


def test_an_empty_token_lets_nothing_through() -> None:
    app = TokenAuth(_hello, "", refuse=_refuse)
    assert _get(app, headers={"Authorization": "Bearer "}).status_code == 401
    assert _get(app).status_code == 401


# -- Identify: the principal of each request (`headwater server`, `headwater ui`) ------------


def _identified(*, cookie: str | None = "login", trusted: tuple[str, ...] = ()) -> Any:
    """`Identify` over an app that answers the principal's name; "s3cret" is alice's token,
    proxy user "dana" is known, any other user is refused 403."""
    from headwater.access import Principal
    from headwater.errors import PermissionDeniedError
    from headwater.identify import Identify

    async def whom(scope: Scope, receive: Any, send: Any) -> None:
        name = scope["state"]["principal"].name.encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": name})

    def identify(token: str | None, user: str | None) -> Any:
        if user is not None:
            if user != "dana":
                raise PermissionDeniedError(f"user {user!r} is not known")
            return Principal.of("user", "dana", "editor", ["team-a"])
        return Principal.of("token", "alice", "editor", ["team-a"]) if token == "s3cret" else None

    def refuse(scope: Scope, status: int, message: str) -> Any:
        async def answer(scope: Scope, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": message.encode()})

        return answer

    return Identify(whom, identify=identify, refuse=refuse, cookie=cookie, trusted=trusted)


def test_a_cookie_counts_only_when_asked_for() -> None:
    pytest.importorskip("starlette")
    cookies = {"login": "s3cret"}
    assert _get(_identified(cookie=None), cookies=cookies).status_code == 401
    assert _get(_identified(), cookies=cookies).text == "alice"
    wrong = _get(_identified(), cookies={"login": "nope"})
    assert wrong.status_code == 401 and "not valid" in wrong.text


def test_the_token_in_the_query_sets_the_cookie_and_leaves_the_url() -> None:
    pytest.importorskip("starlette")
    app = _identified()
    landed = _get(app, "/page?a=1&token=s3cret&b=2")
    assert landed.status_code == 303
    assert landed.headers["location"] == "/page?a=1&b=2"
    cookie = landed.headers["set-cookie"]
    assert cookie.startswith("login=s3cret;") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert _get(app, "/page?token=guess").status_code == 401
    assert _get(_identified(cookie=None), "/page?token=s3cret").status_code == 401


def test_only_a_trusted_address_names_the_user() -> None:
    pytest.importorskip("starlette")
    header = {"kubeflow-userid": "dana"}
    # httpx's ASGI transport sends from 127.0.0.1.
    assert _get(_identified(trusted=("127.0.0.1",)), headers=header).text == "dana"
    assert _get(_identified(trusted=("127.0.0.0/8",)), headers=header).text == "dana"
    assert _get(_identified(trusted=("10.1.2.3",)), headers=header).status_code == 401
    assert _get(_identified(), headers={**header, "Authorization": "Bearer s3cret"}).text == "alice"
    stranger = _get(_identified(trusted=("127.0.0.1",)), headers={"kubeflow-userid": "eve"})
    assert stranger.status_code == 403 and "eve" in stranger.text
    with pytest.raises(Exception, match="IP address or network"):
        _identified(trusted=("proxy.example.com",))


def test_lifespan_and_websockets_pass_untouched() -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    app = TokenAuth(inner, "s3cret", refuse=_refuse)
    for kind in ("lifespan", "websocket"):
        asyncio.run(app({"type": kind, "path": "/"}, _never, _never))
    assert seen == ["lifespan", "websocket"]


async def _never(*args: Any) -> Any:
    raise AssertionError("not called")


# -- BrowserGuard through a real ASGI app -----------------------------------------------------


def _refused(scope: Scope, status: int, message: str) -> Any:
    async def answer(scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": message.encode()})

    return answer


def _send(
    method: str,
    url: str,
    *,
    allowed_hosts: tuple[str, ...] = (),
    headers: dict[str, str] | None = None,
    content: str | None = None,
) -> httpx.Response:
    """One request through `BrowserGuard` (guarding `/api/`) to an app that says hello."""
    app = BrowserGuard(_hello, refuse=_refused, allowed_hosts=allowed_hosts, json_only=["/api/"])

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as client:
            return await client.request(method, url, headers=headers, content=content)

    return asyncio.run(call())


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8080/", ()),
        ("http://127.9.0.1/", ()),
        ("http://localhost:8080/", ()),
        ("http://LOCALHOST.:8080/", ()),
        ("http://[::1]:8080/", ()),
        ("http://ui.example.com:8080/", ("UI.example.com",)),
        ("http://ui.example.com./", ("ui.example.com",)),
        ("http://[fe80::1]:8080/", ("[FE80:0::1]",)),
        ("http://anything.example/", (ANY_HOST,)),
    ],
    ids=repr,
)
def test_loopback_and_allowed_hosts_are_answered(url: str, allowed: tuple[str, ...]) -> None:
    answer = _send(
        "POST",
        url + "api/x",
        allowed_hosts=allowed,
        headers={"Content-Type": "application/json"},
        content="{}",
    )
    assert (answer.status_code, answer.text) == (200, "hello")


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://evil.example:8080/", ()),
        ("http://localhost.evil.example/", ()),
        ("http://127.0.0.1.evil.example/", ()),
        ("http://192.168.1.4:8080/", ()),
        ("http://evil.example/", ("ui.example.com",)),
        ("http://sub.ui.example.com/", ("ui.example.com",)),
    ],
    ids=repr,
)
def test_a_foreign_host_is_refused_even_for_a_read(url: str, allowed: tuple[str, ...]) -> None:
    answer = _send("GET", url, allowed_hosts=allowed)
    assert answer.status_code == 403
    name = httpx.URL(url).host
    assert answer.text.startswith(f"Host {httpx.URL(url).netloc.decode()!r} is not a name of")
    assert answer.text.endswith(f"start it with --allow-host {name}")
    assert "DNS rebinding" in answer.text


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example:8080",
        "http://localhost:8080",
        "https://127.0.0.1:8080",
        "http://127.0.0.1:9999",
        "http://127.0.0.1",
        "null",
        "garbage",
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", ["POST", "DELETE", "PUT"])
def test_a_change_from_another_origin_is_refused(origin: str, method: str) -> None:
    answer = _send(method, "http://127.0.0.1:8080/v1/x:predict", headers={"Origin": origin})
    assert answer.status_code == 403
    assert answer.text.startswith(f"cross-site request refused: {method} from Origin {origin!r}")
    assert "not this server's (http://127.0.0.1:8080)" in answer.text


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://127.0.0.1:8080/api/x", "http://127.0.0.1:8080"),
        ("http://127.0.0.1/api/x", "http://127.0.0.1"),
        ("http://127.0.0.1/api/x", "http://127.0.0.1:80"),
        ("http://localhost:8080/api/x", "HTTP://LocalHost:8080"),
        ("http://[::1]:8080/api/x", "http://[::1]:8080"),
    ],
    ids=repr,
)
def test_a_change_from_the_servers_own_origin_passes(url: str, origin: str) -> None:
    headers = {
        "Origin": origin,
        "Content-Type": "application/json",
        "Sec-Fetch-Site": "same-origin",
    }
    answer = _send("POST", url, headers=headers, content="{}")
    assert (answer.status_code, answer.text) == (200, "hello")


def test_reads_from_another_site_and_clients_without_origin_pass() -> None:
    # A link from another site is a cross-site GET; it changes nothing and may open a page.
    cross = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert _send("GET", "http://127.0.0.1:8080/", headers=cross).status_code == 200
    assert _send("HEAD", "http://127.0.0.1:8080/", headers=cross).status_code == 200
    # curl and the client libraries send neither Origin nor Sec-Fetch-Site.
    predict = _send("POST", "http://127.0.0.1:8080/v1/m:predict", content="{}")
    assert (predict.status_code, predict.text) == (200, "hello")


def test_a_change_the_browser_marks_cross_site_is_refused() -> None:
    answer = _send(
        "POST", "http://127.0.0.1:8080/v1/m:predict", headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert answer.status_code == 403
    assert answer.text.startswith(
        "cross-site request refused: a page of another site sent POST /v1/m:predict "
        "(Sec-Fetch-Site: cross-site)"
    )


@pytest.mark.parametrize(
    "kind",
    [
        None,
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
    ],
    ids=repr,
)
def test_a_state_change_that_is_not_json_is_refused(kind: str | None) -> None:
    headers = {} if kind is None else {"Content-Type": kind}
    answer = _send("POST", "http://127.0.0.1:8080/api/runs", headers=headers, content='{"a": 1}')
    assert answer.status_code == 415
    assert answer.text.startswith(
        "POST /api/runs takes JSON only: send 'Content-Type: application/json' "
        f"(got {kind or 'none'!r})"
    )


@pytest.mark.parametrize(
    ("method", "path", "kind", "content"),
    [
        ("POST", "/api/runs", "application/json", "{}"),
        ("POST", "/api/runs", "Application/JSON; charset=utf-8", "{}"),
        ("PATCH", "/api/runs", "application/merge-patch+json", "{}"),
        ("POST", "/api/runs", None, None),  # no body: nothing a form could carry
        ("DELETE", "/api/runs/1", None, None),
        ("POST", "/v1/m:predict", "text/plain", "{}"),  # not a state change: Origin rules it
    ],
    ids=repr,
)
def test_json_and_bodyless_changes_pass(
    method: str, path: str, kind: str | None, content: str | None
) -> None:
    headers = {} if kind is None else {"Content-Type": kind}
    answer = _send(method, f"http://127.0.0.1:8080{path}", headers=headers, content=content)
    assert (answer.status_code, answer.text) == (200, "hello")


@pytest.mark.parametrize(
    ("bind", "given", "hosts"),
    [
        ("127.0.0.1", [], ()),
        ("localhost", ["UI.Example.com.", "ui.example.com"], ("ui.example.com",)),
        ("0.0.0.0", [], (ANY_HOST,)),
        ("::", [], (ANY_HOST,)),
        ("0.0.0.0", ["ui.example.com"], ("ui.example.com",)),
        ("192.0.2.7", ["ui.example.com"], ("ui.example.com", "192.0.2.7")),
        ("[2001:db8::7]", ["*"], (ANY_HOST, "2001:db8::7")),
        ("myhost.example", ["ui.example.com"], ("ui.example.com", "myhost.example")),
    ],
    ids=repr,
)
def test_hosts_for_bind(bind: str, given: list[str], hosts: tuple[str, ...]) -> None:
    assert hosts_for_bind(bind, given) == hosts


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("", ""),
        ("  ", ""),
        ("ui.example.com:8080", " without a port"),
        ("http://ui.example.com", ""),
        ("a b", ""),
        ("evil.example/x", ""),
    ],
    ids=repr,
)
def test_a_bad_allowed_host_is_refused(name: str, hint: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        hosts_for_bind("127.0.0.1", [name])
    assert str(refused.value) == (
        f"--allow-host takes a host name or address{hint} (e.g. ui.example.com, or * for "
        f"any), got {name!r}"
    )
    with pytest.raises(InvalidArgumentError):
        BrowserGuard(_hello, refuse=_refused, allowed_hosts=[name])


def test_the_guard_lets_lifespan_and_websockets_through() -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    app = BrowserGuard(inner, refuse=_refused)
    for kind in ("lifespan", "websocket"):
        asyncio.run(app({"type": kind, "path": "/"}, _never, _never))
    assert seen == ["lifespan", "websocket"]
