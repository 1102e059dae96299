"""What the UI's routes read off the app that serves a request, as `ui.app.create_app` set it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import Request

    from headwater.access import Principal

__all__ = ["metadata_of", "principal_of"]


def metadata_of(request: Request) -> str | None:
    """The URL of the metadata store the app answering `request` reads (`create_app`'s
    `metadata_url`; None: the default store)."""
    url: str | None = request.app.state.metadata_url
    return url


def principal_of(request: Request) -> Principal:
    """Who sent `request` (`security.Identify` found them); anyone, where no one was asked
    (a path served to all)."""
    from headwater.access import ANONYMOUS

    found: Principal = getattr(request.state, "principal", ANONYMOUS)
    return found
