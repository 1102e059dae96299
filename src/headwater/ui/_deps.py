"""The one place the UI's libraries are imported: a missing one names the `ui` extra."""

from __future__ import annotations

from types import ModuleType

from headwater import _deps

_MODULES = ("fastapi", "uvicorn", "jinja2", "markdown")


def require_ui() -> None:
    """Check the `ui` extra is installed.

    Raises:
        MissingDependencyError: Naming the missing module and the extra to install.
    """
    for name in _MODULES:
        require(name)


def require(name: str) -> ModuleType:
    """Import `name`, or raise `MissingDependencyError` naming the `ui` extra."""
    return _deps.require(name, "ui", "the web UI")
