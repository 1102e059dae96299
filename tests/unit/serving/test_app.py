"""`create_app`'s start-up: the heap a server starts with is kept out of full collections."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from headwater.serving.app import create_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
async def test_server_start_freezes_the_loaded_heap(xgboost_model: Callable[..., str]) -> None:
    app = create_app([xgboost_model()])
    assert gc.get_freeze_count() == 0  # building the app alone changes nothing
    events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> Any:
        return next(events)

    async def send(message: Any) -> None:
        sent.append(message["type"])
        if message["type"] == "lifespan.startup.complete":
            assert gc.get_freeze_count() > 0

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
