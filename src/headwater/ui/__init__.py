"""The web dashboard and its JSON API (`headwater ui`); needs the `ui` extra.

`create_app(metadata_url=None, token=None, *, allowed_hosts=())` builds the FastAPI app:
pages at `/`, `/runs/{id}`, `/artifacts/{id}`, `/compare`, and the JSON API under `/api/v1`
(OpenAPI at `/api/v1/openapi.json`). Everything reads through `headwater.api`; nothing
here is imported by `import headwater`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from fastapi import FastAPI

__all__ = ["create_app"]


def create_app(
    metadata_url: str | None = None,
    token: str | None = None,
    *,
    allowed_hosts: Iterable[str] = (),
    **options: Any,
) -> FastAPI:
    """The UI's ASGI app; see `headwater.ui.app.create_app` (which takes `options` too)."""
    from headwater.ui.app import create_app as build

    return build(metadata_url=metadata_url, token=token, allowed_hosts=allowed_hosts, **options)
