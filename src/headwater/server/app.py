"""The server's ASGI app: the UI's app (pages, `/api/v1`, token, browser guard) plus
KFP's `/apis/v2beta1`, and the run queue that executes what is submitted."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from headwater.server.queue import QueueSettings, RunQueue
from headwater.server.routes import PREFIX, ServerState, handle
from headwater.server.store import KfpStore

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["create_app"]


def create_app(
    settings: QueueSettings,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] = (),
) -> tuple[FastAPI, RunQueue]:
    """The app and its (not yet started) run queue over the store at `settings.metadata_url`.

    Args:
        settings: Where the store is and how runs execute.
        token: If given, every request must present it (as for `headwater ui`).
        allowed_hosts: `Host` names answered to besides loopback's.

    Raises:
        MissingDependencyError: The `ui` extra is not installed.
        StorageError: The metadata store cannot be opened.
    """
    from headwater.ui import create_app as create_ui_app

    app = create_ui_app(settings.metadata_url, token, allowed_hosts=allowed_hosts)
    store = KfpStore(settings.metadata_url)
    queue = RunQueue(store, settings)
    app.state.kfp = ServerState(store, queue, settings.metadata_url)
    methods = ["GET", "POST", "DELETE", "PATCH", "PUT"]
    app.add_route(PREFIX + "/{path:path}", handle, methods=methods, include_in_schema=False)
    app.add_route(PREFIX, handle, methods=methods, include_in_schema=False)
    return app, queue
