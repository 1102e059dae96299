"""Running the server: the listening socket, and the app each worker process builds."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.errors import UserError
from headwater.serving.config import ServerConfig
from headwater.serving.resolve import resolve_all
from headwater.serving.server import CONFIG_ENV, app_from_environment, bind

from .helpers import client


def test_the_socket_is_tcp_so_responses_are_not_delayed() -> None:
    # asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets; without it every answer with a
    # body waited 40 ms for the client's delayed ACK.
    sock = bind("127.0.0.1", 0)
    with sock:
        assert sock.proto == socket.IPPROTO_TCP and sock.getsockname()[1] > 0
        sock.listen()
        with pytest.raises(UserError, match=r"cannot listen on 127\.0\.0\.1:.*choose another"):
            bind("127.0.0.1", sock.getsockname()[1])


@pytest.mark.anyio
async def test_a_worker_builds_its_app_from_the_config_file(
    xgboost_model: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ServerConfig(sources=tuple(resolve_all([xgboost_model()])), token="t", workers=2)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_json()))
    assert ServerConfig.from_json(json.loads(path.read_text())) == config
    monkeypatch.setenv(CONFIG_ENV, str(path))
    app = app_from_environment()
    async with client(app, authorization="Bearer t") as c:
        answer = await c.post("/v1/models/churn:predict", json={"instances": [[1, 2, 3, 4]]})
    assert answer.status_code == 200, answer.text
    monkeypatch.delenv(CONFIG_ENV)
    with pytest.raises(UserError, match=CONFIG_ENV):
        app_from_environment()


def test_create_app_refuses_bad_settings_and_models(handler_file: str) -> None:
    from headwater.errors import InvalidArgumentError
    from headwater.serving.app import create_app

    with pytest.raises(InvalidArgumentError, match="max_body_bytes must be a positive integer"):
        create_app([f"m={handler_file}:Untyped"], max_body_bytes=0)
    with pytest.raises(UserError, match=r"no class 'Nope'.*classes there: Lengths, Slow, Untyped"):
        create_app([f"m={handler_file}:Nope"])
