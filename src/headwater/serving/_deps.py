"""The libraries the model server needs, or an error naming the `serve` extra."""

from __future__ import annotations

import importlib.util

from headwater.errors import MissingDependencyError

#: What `pip install 'headwater[serve]'` brings, by import name.
SERVE_MODULES = ("fastapi", "uvicorn", "numpy", "prometheus_client")


def require_serve() -> None:
    """Check that the server's libraries are installed, before anything imports them.

    Raises:
        MissingDependencyError: One is missing; the message names it and the extra.
    """
    missing = [m for m in SERVE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(
            f"The model server needs {', '.join(repr(m) for m in missing)}. Install it with: "
            "pip install 'headwater[serve]'"
        )
