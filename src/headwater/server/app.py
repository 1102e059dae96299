"""The server's ASGI app: the UI's app (pages, `/api/v1`, token, browser guard) plus KFP's
`/apis/v2beta1`, over one store, with one set of run operations that both use, and the run
queue that executes what either submits."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from headwater.server.kfp.wire import status_body
from headwater.server.operations import RunOperations
from headwater.server.queue import QueueSettings, RunQueue
from headwater.server.router import PREFIX, UPLOADS, ServerState, handle
from headwater.ui.body_limit import DEFAULT_MAX_BODY_MB
from headwater.ui.identity import Gate

if TYPE_CHECKING:
    from fastapi import FastAPI

    from headwater.ui.audit import AuditLog

__all__ = ["create_app"]


def create_app(
    settings: QueueSettings,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] = (),
    max_body_bytes: int = int(DEFAULT_MAX_BODY_MB * 2**20),
    trusted_proxies: Iterable[str] = (),
    user_header: str = "kubeflow-userid",
    user_prefix: str = "",
    audit: AuditLog | None = None,
) -> tuple[FastAPI, RunQueue]:
    """The app and its (not yet started) run queue over the store at `settings.metadata_url`.

    Args:
        settings: Where the store is and how runs execute.
        token: The server's own token: an admin's (without other principals, every
            request must present it, as for `headwater ui`).
        allowed_hosts: `Host` names answered to besides loopback's.
        max_body_bytes: The largest request body read; larger is 413.
        trusted_proxies: Addresses of an auth proxy whose `user_header` names the user.
        user_header: That header (KFP's `kubeflow-userid`), less `user_prefix`.
        user_prefix: See `user_header`.
        audit: Where requests that may change something are recorded; None: nowhere.

    Raises:
        MissingDependencyError: The `ui` extra is not installed.
        StorageError: The metadata store cannot be opened.
    """
    from headwater.metadata import open_store
    from headwater.server import resources, run_routes  # noqa: F401 - they register routes
    from headwater.ui import create_app as create_ui_app

    store = open_store(settings.metadata_url)
    operations = RunOperations(store)
    queue = RunQueue(store, operations, settings)
    operations.wake = queue.wake
    trusted = tuple(trusted_proxies)
    gate = Gate(lambda: store, token, trusted_proxy=bool(trusted))
    operations.multi_user = gate.multi_user
    app = create_ui_app(
        settings.metadata_url,
        token,
        allowed_hosts=allowed_hosts,
        runs=operations,
        api_prefixes={PREFIX + "/": status_body},
        uploads=UPLOADS,
        # Says nothing secret: a client with a wrong token gets its 401 on a real call.
        open_paths=(PREFIX + "/healthz",),
        max_body_bytes=max_body_bytes,
        gate=gate,
        trusted_proxies=trusted,
        user_header=user_header,
        user_prefix=user_prefix,
        audit=audit,
    )
    app.state.kfp = ServerState(store, operations, queue, settings, gate)
    methods = ["GET", "POST", "DELETE", "PATCH", "PUT"]
    app.add_route(PREFIX + "/{path:path}", handle, methods=methods, include_in_schema=False)
    app.add_route(PREFIX, handle, methods=methods, include_in_schema=False)
    return app, queue
