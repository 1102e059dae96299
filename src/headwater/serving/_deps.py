"""The libraries the model server needs, or an error naming the `serve` extra."""

from __future__ import annotations

from headwater._deps import require_installed

#: What `pip install 'headwater[serve]'` brings, by import name.
SERVE_MODULES = ("fastapi", "uvicorn", "numpy", "prometheus_client")


def require_serve() -> None:
    """Check that the server's libraries are installed, before anything imports them.

    Raises:
        MissingDependencyError: One is missing; the message names it and the extra.
    """
    require_installed(SERVE_MODULES, "serve", "The model server")
