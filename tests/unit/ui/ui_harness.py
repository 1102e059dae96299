"""Helpers for the UI tests: the demo pipeline, the `Store` the `store` fixture (conftest.py)
fills, and `call`, one in-process request through `httpx.ASGITransport`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx

PIPELINE = str(Path(__file__).parent / "pipelines" / "ui_demo.py")
ENV = ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "HEADWATER_TOKEN")


@dataclass(frozen=True)
class Store:
    """The runs made for a test module: `ok` (newest but one) and `failed` (newest)."""

    home: Path
    first: str
    ok: str
    failed: str


def call(
    method: str,
    path: str,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    cookies: dict[str, str] | None = None,
    json: object = None,
    content: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
) -> httpx.Response:
    """One request to a fresh app over the default store, in process."""
    from headwater.ui import create_app

    async def go() -> httpx.Response:
        app = create_app(token=token, allowed_hosts=allowed_hosts)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8080", cookies=cookies
        ) as client:
            return await client.request(method, path, headers=headers, json=json, content=content)

    return asyncio.run(go())
