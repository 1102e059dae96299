"""The shared server rules: the token's source, loopback, the bind check, `TokenAuth`."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest

from headwater.errors import InvalidArgumentError, UserError
from headwater.security import (
    TOKEN_ENV,
    TokenAuth,
    check_bind,
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
    ],
    ids=["flag-wins", "env", "empty-flag", "empty-env", "neither"],
)
def test_read_token(
    monkeypatch: pytest.MonkeyPatch, given: str | None, env: str | None, token: str | None
) -> None:
    if env is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, env)
    assert read_token(given) == token


@pytest.mark.parametrize(
    ("host", "token"),
    [("127.0.0.1", None), ("localhost", ""), ("0.0.0.0", "t0ken"), ("::", "t0ken")],
    ids=repr,
)
def test_check_bind_allows(host: str, token: str | None) -> None:
    check_bind(host, token)


@pytest.mark.parametrize("token", [None, ""], ids=["none", "empty"])
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


def test_a_cookie_counts_only_when_asked_for() -> None:
    pytest.importorskip("starlette")
    cookies = {"login": "s3cret"}
    assert _get(_guarded(), cookies=cookies).status_code == 401
    assert _get(_guarded(cookie="login"), cookies=cookies).status_code == 200
    wrong = _get(_guarded(cookie="login"), cookies={"login": "nope"})
    assert wrong.status_code == 401 and wrong.json()["missing"] is True


def test_the_token_in_the_query_sets_the_cookie_and_leaves_the_url() -> None:
    pytest.importorskip("starlette")
    app = _guarded(cookie="login")
    landed = _get(app, "/page?a=1&token=s3cret&b=2")
    assert landed.status_code == 303
    assert landed.headers["location"] == "/page?a=1&b=2"
    cookie = landed.headers["set-cookie"]
    assert cookie.startswith("login=s3cret;") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert _get(app, "/page?token=guess").status_code == 401
    assert _get(_guarded(), "/page?token=s3cret").status_code == 401  # no cookie login


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
